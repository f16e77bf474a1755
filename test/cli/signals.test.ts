import t from 'tap'
import { reloadSignal } from '../../lib/cli/signals.js'

t.test('SIGHUP: ignored until a reload is given, then runs it each time; the process stays', async (t) => {
  const before = process.listenerCount('SIGHUP')
  const onReload = reloadSignal()
  t.equal(process.listenerCount('SIGHUP'), before + 1, 'listening from the start, so node does not end the process')
  process.emit('SIGHUP', 'SIGHUP')
  let reloads = 0
  onReload(() => reloads++)
  process.emit('SIGHUP', 'SIGHUP')
  process.emit('SIGHUP', 'SIGHUP')
  t.equal(reloads, 2, 'a SIGHUP before the reload was given did nothing')
})
