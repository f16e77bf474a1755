// A redis-server of the bench's own for (cr): taken from PATH, on a free loopback port, with no
// persistence (nothing written to disk), stopped at the end of the run or when the parent exits.
import { execFileSync, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { connect, createServer } from 'node:net'

const READY_MS = 5000

/** Resolves to { url, cpu(), stop() }, or to { skipped: why } when no redis-server can be started. */
export async function startRedis() {
  const port = await freePort()
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  )
  const kill = () => child.kill('SIGKILL')
  process.on('exit', kill)
  const exited = new Promise((resolve) => child.once('exit', resolve))
  const failed = new Promise((resolve) => {
    child.once('error', (error) =>
      resolve(error.code === 'ENOENT' ? 'redis-server is not on PATH' : `redis-server: ${error.message}`),
    )
    child.once('exit', (code) => resolve(`redis-server exited with ${code}`))
  })
  const why = await Promise.race([failed, ready(port)])
  if (why !== undefined) {
    kill()
    process.off('exit', kill)
    return { skipped: why }
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    cpu: () => cpuOf(child.pid),
    async stop() {
      const timer = setTimeout(kill, 3000)
      child.kill('SIGTERM')
      await exited
      clearTimeout(timer)
      process.off('exit', kill)
    },
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

/** Undefined once the server answers PING, a reason when it has not within READY_MS. */
async function ready(port) {
  const until = Date.now() + READY_MS
  while (Date.now() < until) {
    if (await ping(port)) return undefined
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return `redis-server did not answer PING within ${READY_MS} ms`
}

function ping(port) {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.setTimeout(500, () => socket.destroy())
    socket.once('connect', () => socket.write('PING\r\n'))
    socket.once('data', (data) => {
      socket.destroy()
      resolve(data.toString().startsWith('+PONG'))
    })
    socket.once('error', () => resolve(false))
    socket.once('close', () => resolve(false))
  })
}

let ticksPerSecond

/** The CPU time (user + system) the process has used, in microseconds, from /proc (NaN where there is none). */
function cpuOf(pid) {
  try {
    ticksPerSecond ??= Number(execFileSync('getconf', ['CLK_TCK']).toString()) || 100
    // The fields after the command name, which is in parentheses and may contain spaces; utime and stime are the 14th and 15th.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / ticksPerSecond
  } catch {
    return Number.NaN
  }
}
