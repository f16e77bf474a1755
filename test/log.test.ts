import { spawn } from 'node:child_process'
import { type EventEmitter, once } from 'node:events'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import type { DestinationStream } from 'pino'
import t from 'tap'
import { maskCardNumbers } from '../lib/card-mask.js'
import { LOG_DEFAULTS } from '../lib/defaults.js'
import { createLogDestination, createLogger, errorFacts, isoTime, maskingLogger } from '../lib/log.js'
import { until } from './helpers/wait.js'
import { secretIn, TEST_REDIS_PASSWORD, WRONG_REDIS_PASSWORD } from './helpers/logs.js'

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

t.test('an error is logged by its type, code, message and stack, never what a library hangs on it', async (t) => {
  const lines: string[] = []
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString())
      done()
    },
  })
  const logger = createLogger({ destination })
  // As ioredis rejects an AUTH: the command and its arguments on the error.
  const refused = Object.assign(new Error('WRONGPASS invalid username-password pair'), {
    code: 'WRONGPASS',
    command: { name: 'auth', args: ['default', 'hunter2-redis-password'] },
  })
  logger.warn({ err: refused }, 'with the error')
  logger.warn({ err: errorFacts(refused) }, 'with its facts')
  logger.warn({ err: errorFacts('a string') }, 'not an error')
  logger.warn({ err: errorFacts(Object.assign(new Error('numbered'), { code: 5 })) }, 'a numeric code')
  t.equal(lines.length, 4)
  for (const line of lines) t.notMatch(line, /hunter2|command|args/)
  const [whole, facts, text, numeric] = lines.map((line) => JSON.parse(line).err)
  t.match(whole, {
    type: 'Error',
    code: 'WRONGPASS',
    message: 'WRONGPASS invalid username-password pair',
    stack: /^Error/,
  })
  t.same(facts, { code: 'WRONGPASS', message: 'WRONGPASS invalid username-password pair' })
  t.same(text, { message: 'a string' })
  t.same(numeric, { message: 'numbered' })
})

t.test('without a destination the logger writes to stdout', async (t) => {
  const logger = createLogger()
  t.equal(logger.level, 'info')
})

t.test(
  'the timestamp is the ISO time of the moment, within one millisecond, one second and across seconds',
  async (t) => {
    const start = Date.UTC(2026, 10, 22, 23, 59, 59, 0)
    for (const now of [
      start,
      start,
      start + 7,
      start + 7,
      start + 999,
      start + 1000,
      start + 1000,
      start + 1042,
      start - 86_400_000 + 5,
      start + 7,
    ]) {
      t.equal(isoTime(now), `,"time":"${new Date(now).toISOString()}"`, new Date(now).toISOString())
    }
    t.match(JSON.parse(`{${isoTime().slice(1)}}`).time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
  },
)

/** Whether the file's text comes to pass `ok`: ten seconds, generous for a loaded machine, where a write lands late. */
const written = (file: string, ok: (text: string) => boolean) => until(() => ok(readFileSync(file, 'utf8')), 10_000)

t.test(
  'the default destination gathers lines into batches: written at the interval, or at once by flush',
  async (t) => {
    const file = join(t.testdir(), 'lines.log')
    const destination = createLogDestination(file)
    const logger = createLogger({ destination })
    t.teardown(() => (destination as unknown as { end(): void }).end())
    // The file is opened asynchronously: a fixed sleep is outrun on a loaded machine.
    await once(destination as unknown as EventEmitter, 'ready')
    logger.info({ n: 1 }, 'first')
    logger.info({ n: 2 }, 'second')
    t.equal(readFileSync(file, 'utf8'), '', 'two short lines wait in the buffer')
    const lines = (text: string) => text.split('\n').filter(Boolean).length
    t.ok(await written(file, (text) => lines(text) === 2), 'the interval wrote them')
    logger.info({ n: 3 }, 'third')
    await new Promise<void>((resolve) => logger.flush(() => resolve()))
    // The flush's write may land a moment after its callback on a loaded machine: waited for, not slept on.
    t.ok(await written(file, (text) => text.includes('"msg":"third"')), 'flush wrote the third')
    logger.info({ filler: 'x'.repeat(LOG_DEFAULTS.alone.bufferBytes) }, 'large')
    t.ok(await written(file, (text) => text.includes('"msg":"large"')), 'a full buffer is written without a flush')
  },
)

t.test('the default destination masks each line it writes, so the logger writing there needs no hook', async (t) => {
  const file = join(t.testdir(), 'masked.log')
  const destination = createLogDestination(file)
  const logger = createLogger({ destination })
  t.teardown(() => (destination as unknown as { end(): void }).end())
  await once(destination as unknown as EventEmitter, 'ready')
  destination.write('card 4444333322221111, full width \uff14\uff14\uff14\uff14333322221111\n')
  logger.info({ path: '/x?pan=4444-3333-2222-1111', n: 1 }, 'plain')
  await new Promise<void>((resolve) => logger.flush(() => resolve()))
  t.ok(await written(file, (text) => text.includes('"msg":"plain"')))
  const text = readFileSync(file, 'utf8')
  t.notMatch(text, /4444333322221111|4444-3333-2222-1111/)
  t.match(text, 'card 444433******1111, full width \uff14\uff14\uff14\uff1433******1111\n')
  t.match(text, '"path":"/x?pan=4444-33**-****-1111","n":1,"msg":"plain"}\n', 'masked once, by the destination')
})

t.test('a process that crashes still writes the lines it had gathered', async (t) => {
  const file = join(t.testdir(), 'crash.log')
  const script = `
    const { createLogger, createLogDestination } = await import('./lib/log.ts')
    const destination = createLogDestination(process.env.LOG_FILE)
    destination.on('ready', () => {
      createLogger({ destination }).info({ request: 1 }, 'before the crash')
      throw new Error('crash')
    })`
  const child = spawn(process.execPath, ['--import=./test/typescript.mjs', '--input-type=module', '-e', script], {
    env: { ...process.env, LOG_FILE: file },
    stdio: 'ignore',
  })
  const code = await new Promise((resolve) => child.once('exit', resolve))
  t.not(code, 0, 'it crashed')
  t.match(readFileSync(file, 'utf8'), /"msg":"before the crash"/)
})

t.test(
  'a destination that refuses every write (/dev/full: no space left) ends nothing: each failed write is told, and lines past heldBytes are dropped',
  async (t) => {
    const troubles: string[] = []
    const destination = createLogDestination('/dev/full', { onTrouble: (trouble) => troubles.push(trouble) })
    const other = createLogDestination('/dev/full')
    await Promise.all([destination, other].map((each) => once(each as unknown as EventEmitter, 'ready')))
    const logger = createLogger({ destination })
    logger.info({ n: 1 }, 'first')
    await new Promise<void>((resolve) => logger.flush(() => resolve()))
    t.ok(await until(() => troubles.includes('writeFailed')), 'the failed write is told, not thrown')
    // One told to no one is no crash either.
    other.write('a line\n')
    await new Promise((resolve) => (other as unknown as { flush(done: (error?: Error) => void): void }).flush(resolve))
    // Lines of 1 MiB: the bound is passed in a few writes, each line refused whole or kept whole.
    const line = `${'x'.repeat(2 ** 20 - 1)}\n`
    for (let i = 0; i <= LOG_DEFAULTS.heldBytes / 2 ** 20; i++) destination.write(line)
    t.ok(troubles.includes('lineDropped'), 'a line past the bound is dropped')
    // Closed one after the other: the exit's flush forgets each (lib/log.ts); their waiting lines go with them.
    for (const each of [other, destination])
      await new Promise<void>((resolve) => {
        const closing = each as unknown as EventEmitter & { destroy(): void }
        closing.once('close', () => resolve())
        closing.destroy()
      })
  },
)

t.test('a process whose log refuses its lines still exits, at once and with its own code', async (t) => {
  const script = `
    const { createLogger, createLogDestination } = await import('./lib/log.ts')
    const destination = createLogDestination('/dev/full')
    destination.on('ready', () => {
      createLogger({ destination }).info({ request: 1 }, 'waiting in the buffer as the process exits')
      process.exit(3)
    })`
  // Bounded: a flush at exit that retried the refused write for ever would hold the process until this kills it.
  const child = spawn(process.execPath, ['--import=./test/typescript.mjs', '--input-type=module', '-e', script], {
    stdio: 'ignore',
    timeout: 30_000,
    // tap's exit hooks in the child listen for SIGTERM, which a process stuck in its exit never runs.
    killSignal: 'SIGKILL',
  })
  const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null]
  t.same({ code, signal }, { code: 3, signal: null })
})

t.test(
  'a destination shared with other processes writes whole lines of at most PIPE_BUF bytes at a time, so their lines never interleave',
  async (t) => {
    const file = join(t.testdir(), 'writes.log')
    const shared = createLogDestination(file, { shared: true }) as unknown as {
      maxWrite: number
      minLength: number
      end(): void
    }
    const alone = createLogDestination(file) as unknown as { maxWrite: number; minLength: number; end(): void }
    t.teardown(() => {
      shared.end()
      alone.end()
    })
    t.equal(shared.maxWrite, LOG_DEFAULTS.shared.writeBytes)
    t.equal(LOG_DEFAULTS.shared.writeBytes, 4096, 'POSIX PIPE_BUF on Linux')
    t.equal(alone.maxWrite, LOG_DEFAULTS.alone.writeBytes, 'a process writing alone makes larger writes')
    t.ok(alone.maxWrite > shared.maxWrite)
    for (const destination of [shared, alone])
      t.ok(destination.minLength < destination.maxWrite, 'a write starts before a batch could outgrow it')
  },
)

t.test('lines go out byte for byte, in order, whatever their characters, across batches', async (t) => {
  const file = join(t.testdir(), 'bytes.log')
  const destination = createLogDestination(file) as unknown as DestinationStream & {
    end(): void
    once(event: 'close', listener: () => void): void
  }
  const logger = createLogger({ destination })
  await once(destination as unknown as EventEmitter, 'ready')
  const texts = ['plain', 'Müller ße', '支付 网关', 'emoji 💳', 'quote " and backslash \\', 'x'.repeat(5000)]
  const count = Math.ceil((LOG_DEFAULTS.alone.writeBytes * 3) / 500)
  for (let i = 0; i < count; i++) logger.info({ i, text: texts[i % texts.length] }, 'line')
  // end() writes every batch before it closes (flush(cb) may call back while the tail of a batch still waits).
  await new Promise<void>((resolve) => {
    destination.once('close', resolve)
    destination.end()
  })
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { i: number; text: string })
  t.equal(lines.length, count, 'every line, none cut')
  t.same(
    lines.map((line) => [line.i, line.text]),
    Array.from({ length: count }, (_, i) => [i, texts[i % texts.length]]),
  )
})

t.test("the suite's scan finds a test card number in any spelling and a test Redis password", async (t) => {
  for (const line of [
    '{"path":"/p?pan=4444+3333+2222+1111"}',
    '{"path":"/p?pan=4444%203333%202222%201111"}',
    '{"path":"/p?pan=%34444333322221111"}',
    String.raw`{"msg":"\u00344443333-2222_1111"}`,
    `{"err":{"args":["${WRONG_REDIS_PASSWORD}"]}}`,
    `{"url":"redis://:${encodeURIComponent(TEST_REDIS_PASSWORD)}@h"}`,
  ])
    t.not(secretIn(line), undefined, line)
  for (const line of ['{"path":"/p?pan=444433******1111"}', '{"msg":"gateway listening"}'])
    t.equal(secretIn(line), undefined, line)
  for (const line of ['{"path":"/p?pan=4444+3333+2222+1111"}'])
    t.equal(secretIn(maskCardNumbers(line)), undefined, 'masked, it is gone')
})

t.test('maskingLogger: every text of what it is given is masked, however deep, whatever was thrown', async (t) => {
  const given: unknown[] = []
  const record = (fields: unknown, message: string) => given.push(fields, message)
  const logger = maskingLogger({ info: record, warn: record, error: record } as never)
  const named = Object.assign(new Error('declined'), {
    name: 'Declined 4111111111111111',
    code: 'PAN_4111111111111111',
  })
  const thrown = { message: 'card 4111111111111111', pan: 4111111111111111, cards: [['4111 1111 1111 1111']] }
  logger.error(
    { err: thrown, named, '4111111111111111': true, count: 3, none: null, big: 4111111111111111n },
    'on 4111111111111111',
  )
  const written = JSON.stringify(given)
  // Red before: only top-level strings and an Error's message and stack were masked.
  t.notMatch(written, /4111111111111111|4111 1111 1111 1111/)
  t.match(given[0], {
    err: { message: 'card 411111******1111', pan: '411111******1111', cards: [['4111 11** **** 1111']] },
    named: { type: 'Declined 411111******1111', code: 'PAN_411111******1111', message: 'declined' },
    '411111******1111': true,
    count: 3,
    none: null,
    big: '411111******1111',
  })
  t.equal(given[1], 'on 411111******1111')
  let deep: unknown = 'x'
  for (let i = 0; i < 20; i++) deep = [deep]
  logger.info({ deep }, 'deep')
  t.match(JSON.stringify(given[2]), /\[nested too deep\]/, 'a value nested past the copy is not walked')
})
