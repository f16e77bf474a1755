// A node:cluster primary that is not serve's own, as PM2's cluster mode is: it forks one worker running the CLI
// (lib/cli.ts) with the arguments given, passes SIGTERM on, and exits with the worker's code.
import cluster from 'node:cluster'

cluster.setupPrimary({ exec: 'lib/cli.ts', args: process.argv.slice(2) })
const worker = cluster.fork()
worker.on('exit', (code) => process.exit(code ?? 1))
process.on('SIGTERM', () => worker.process.kill('SIGTERM'))
