// (cli): the command as the package ships it, dist/cli.js (one bundled file, scripts/bundle-cli.js), running
// `serve` in this process: the memory store (BENCH_IDEMPOTENCY), the sample policies, BENCH_USERS as its
// credentials file, request logs to this process's stdout. The other gateway children build the gateway from
// the library (bench/lib/gateway.js); this one measures what `payments-gate serve` runs, from BENCH_DIST
// when it names another build.
import { mkdtempSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { freePort } from '../../lib/ports.js'
import { target } from './child.js'

const dist = resolve(process.env.BENCH_DIST || fileURLToPath(new URL('../../../dist', import.meta.url)))
const credentials = join(mkdtempSync(join(tmpdir(), 'bench-cli-')), 'credentials.json')
writeFileSync(credentials, JSON.stringify({ users: JSON.parse(process.env.BENCH_USERS) }))
const port = await freePort()
process.argv = [
  process.argv[0],
  join(dist, 'cli.js'),
  'serve',
  ...['--target', target(), '--credentials', credentials, '--listen', `127.0.0.1:${port}`],
  ...['--policies', fileURLToPath(new URL('../../../policies', import.meta.url))],
  ...['--idempotency', process.env.BENCH_IDEMPOTENCY || 'memory', '--shutdown-delay', '0'],
]
// The command runs until it is stopped: not awaited. It listens once a connection to its port is taken.
import(pathToFileURL(join(dist, 'cli.js')).href)
const listening = () =>
  new Promise((answer) => {
    const socket = connect(port, '127.0.0.1')
    socket.once('connect', () => {
      socket.destroy()
      answer(true)
    })
    socket.once('error', () => answer(false))
  })
while (!(await listening())) await new Promise((next) => setTimeout(next, 20))
process.on('message', (message) => {
  if (message === 'stop') process.exit(0)
})
process.on('disconnect', () => process.exit(0))
process.send({ port })
