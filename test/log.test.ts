import { Writable } from 'node:stream'
import t from 'tap'
import { createLogger, isoTime } from '../lib/log.js'

t.test('every line the logger writes is masked, wherever the number sits, and has no epoch timestamp', async (t) => {
  const lines: string[] = []
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString())
      done()
    },
  })
  const logger = createLogger({ destination, level: 'debug' })
  logger.info({ path: '/x?pan=4444333322221111', nested: { user: 'u4444333322221111' } }, 'card 4444333322221111')
  logger.debug('debug too')
  t.equal(lines.length, 2)
  t.notMatch(lines[0], /4444333322221111/)
  t.equal(lines[0]?.match(/444433\*{6}1111/g)?.length, 3)
  t.match(JSON.parse(lines[0] as string).time, /^\d{4}-\d\d-\d\dT/)
})

t.test('without a destination the logger writes to stdout', async (t) => {
  const logger = createLogger()
  t.equal(logger.level, 'info')
})

t.test('the timestamp is the ISO time of the moment, within one second and across seconds', async (t) => {
  const start = Date.UTC(2026, 10, 22, 23, 59, 59, 0)
  for (const now of [start, start + 7, start + 999, start + 1000, start + 1042, start - 86_400_000 + 5]) {
    t.equal(isoTime(now), `,"time":"${new Date(now).toISOString()}"`, new Date(now).toISOString())
  }
  t.match(JSON.parse(`{${isoTime().slice(1)}}`).time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
})
