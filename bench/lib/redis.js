// A redis-server of the bench's own for (cr), and a Redis Cluster of three for (ck): taken from PATH, on free
// loopback ports, with no persistence (nothing written to disk but a cluster node's own nodes.conf, in a
// temporary folder removed at the end), stopped at the end of the run or when the parent exits.
import { execFile, execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from './ports.js'

const READY_MS = 5000

/**
 * Resolves to { url, cpu(), stop() }, or to { skipped: why } when no redis-server can be started. `settings`
 * are more of redis-server's arguments, `cwd` where it runs.
 */
export async function startRedis(settings = [], cwd = undefined) {
  const port = await freePort()
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...settings],
    { stdio: 'ignore', cwd },
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

/**
 * A Redis Cluster of three primaries and no replicas, its slots spread by `redis-cli --cluster create` (the
 * test suite's cluster has replicas: the bench measures the gateway's cost, not a failover). Resolves to
 * { url: 'redis-cluster://...', cpu(), stop() } (cpu summed over the three), or to { skipped: why }.
 */
export async function startRedisCluster() {
  const dir = mkdtempSync(join(tmpdir(), 'bench-cluster-'))
  const nodes = []
  const stop = async () => {
    await Promise.all(nodes.map((node) => node.stop()))
    rmSync(dir, { recursive: true, force: true })
  }
  for (let i = 0; i < 3; i++) {
    const node = await startRedis(['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${i}.conf`], dir)
    if (node.skipped) {
      await stop()
      return node
    }
    nodes.push(node)
  }
  const addresses = nodes.map((node) => node.url.slice('redis://'.length))
  const created = await new Promise((resolve) =>
    execFile(
      'redis-cli',
      ['--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes'],
      { timeout: 60_000 },
      (error, stdout, stderr) =>
        resolve(
          error
            ? `redis-cli --cluster create: ${error.code === 'ENOENT' ? 'not on PATH' : stderr || stdout}`
            : undefined,
        ),
    ),
  )
  const why = created ?? (await clusterReady(addresses))
  if (why !== undefined) {
    await stop()
    return { skipped: why }
  }
  return {
    url: `redis-cluster://${addresses.join(',')}`,
    cpu: () => nodes.reduce((sum, node) => sum + node.cpu(), 0),
    stop,
  }
}

/** Undefined once every node says the cluster is ok, a reason when one has not within READY_MS. */
async function clusterReady(addresses) {
  const until = Date.now() + READY_MS
  const ok = (address) =>
    new Promise((resolve) => {
      const [host, port] = address.split(':')
      execFile('redis-cli', ['-h', host, '-p', port, 'cluster', 'info'], { timeout: 2000 }, (error, stdout) =>
        resolve(!error && stdout.includes('cluster_state:ok')),
      )
    })
  while (Date.now() < until) {
    if ((await Promise.all(addresses.map(ok))).every(Boolean)) return undefined
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return `the Redis Cluster was not ok within ${READY_MS} ms`
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
