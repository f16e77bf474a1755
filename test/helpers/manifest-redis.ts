/** The Redis of deploy/redis.yaml run as its container runs it, on a free loopback port (docs/idempotency.md, Kubernetes). */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import { parseAllDocuments } from 'yaml'
import { until } from './http.js'
import { serverProcess } from './redis.js'
import { accepts, freePort } from './servers.js'

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8')
const objectsOf = (file: string): any[] => parseAllDocuments(read(file)).map((document) => document.toJS())

const objects = [...objectsOf('deploy/redis.yaml'), ...objectsOf('deploy/payments.yaml')]
const find = (kind: string, name: string) => {
  const found = objects.find((object) => object.kind === kind && object.metadata?.name === name)
  if (found === undefined) throw new Error(`deploy/ has no ${kind} ${name}`)
  return found
}

/** The Redis Deployment's pod and its one container, as deploy/redis.yaml writes them. */
export const redisPod = find('Deployment', 'payments-gate-redis').spec.template.spec
export const redisContainer = redisPod.containers[0]

const gateway = find('Deployment', 'payments').spec.template.spec.containers.find(
  (container: any) => container.name === 'payments-gate',
)
/** A variable of the gateway's container in deploy/payments.yaml. */
export const gatewayVariable = (name: string): string =>
  gateway.env.find((variable: any) => variable.name === name).value

/** Each Secret's password, by its name: made different, and hard to quote (a space, a quote, a backslash). */
export const SECRET_PASSWORDS: Readonly<Record<string, string>> = {
  'payments-gate-redis': 'a password from the Secret',
  'payments-gate-redis-replica': 'the "replica\'s" pass\\word',
  'payments-gate-redis-sentinel': 'the Sentinel user\'s "pass\\word"',
}

export interface ManifestRedis {
  /** The gateways' store URL (deploy/payments.yaml's), on this server. */
  readonly url: string
  readonly port: number
  /** The password of the gateways' user, `payments-gate`. */
  readonly password: string
  /** The container's variables, with the mounts' paths made the test's. */
  readonly env: Readonly<Record<string, string>>
  /** A probe's command of the container, run against this server. */
  probe(name: 'readinessProbe' | 'livenessProbe'): string[]
  /** Freezes the server (SIGSTOP), as a wedged Redis; `thaw` lets it run again. */
  freeze(): void
  thaw(): void
  /** Kills the server outright (SIGKILL), as a lost node; resolves once it exited. */
  kill(): Promise<void>
}

export interface ManifestRedisOptions {
  /** A replica of the server on this port: `--replicaof` after the script, as docs/idempotency.md says. */
  replicaOf?: number
  /** The port to listen on: a server started again where it was. */
  port?: number
}

/** Kills a child outright, frozen or not; resolves once it exited, at once when it already has. */
function killed(child: ChildProcess | undefined): Promise<void> {
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  const exit = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  child.kill('SIGCONT')
  child.kill('SIGKILL')
  return exit
}

/**
 * The Redis of deploy/redis.yaml as its container runs it: its command (the ConfigMap's ACL file, each Secret's
 * password), with its mounts made folders of the test, on a loopback port; ready once its readiness probe passes.
 */
export async function startManifestRedis(t: Test, options: ManifestRedisOptions = {}): Promise<ManifestRedis> {
  // A folder of its own: a test may start several.
  const root = mkdtempSync(join(tmpdir(), 'payments-gate-manifest-redis-'))
  const server: { child?: ChildProcess } = {}
  t.teardown(async () => {
    await killed(server.child)
    rmSync(root, { recursive: true, force: true })
  })
  const mounted = (path: string) => join(root, path)
  for (const mount of redisContainer.volumeMounts) {
    mkdirSync(mounted(mount.mountPath), { recursive: true })
    const volume = redisPod.volumes.find((candidate: any) => candidate.name === mount.name)
    if (volume.configMap !== undefined) {
      const data = find('ConfigMap', volume.configMap.name).data
      for (const [key, value] of Object.entries(data))
        writeFileSync(join(mounted(mount.mountPath), key), value as string)
    }
    // A Secret made with --from-file may end with a newline.
    if (volume.secret !== undefined)
      for (const item of volume.secret.items)
        writeFileSync(join(mounted(mount.mountPath), item.path), `${SECRET_PASSWORDS[volume.secret.secretName]}\n`)
  }
  const port = options.port ?? (await freePort())
  const local = (text: string) =>
    redisContainer.volumeMounts.reduce(
      (line: string, mount: any) => line.replaceAll(mount.mountPath, mounted(mount.mountPath)),
      text,
    )
  // A primary syncs a new replica at once: Redis's default waits 5 s for more replicas before a diskless sync.
  const script = local(redisContainer.args[0]).replace(
    'exec redis-server',
    `exec redis-server --port ${port} --bind 127.0.0.1 --repl-diskless-sync-delay 0`,
  )
  t.equal(redisContainer.command.join(' '), 'sh -c', 'the container runs its script with sh')
  const replica = options.replicaOf === undefined ? [] : ['--replicaof', '127.0.0.1', String(options.replicaOf)]
  // In /data, the image's working folder: a replica writes the copy it syncs there.
  const child = serverProcess('sh', ['-c', script, 'redis', ...replica], { cwd: mounted('/data') })
  server.child = child
  const env = Object.fromEntries(redisContainer.env.map(({ name, value }: any) => [name, local(value)]))
  const probe = (name: 'readinessProbe' | 'livenessProbe') =>
    redisContainer[name].exec.command.map((arg: string) => arg.replace('redis-cli', `redis-cli -p ${port}`))
  const running = () => {
    if (child.exitCode !== null) throw new Error(`the manifest's Redis on port ${port} exited at start`)
  }
  const accepting = () => {
    running()
    return accepts(port)
  }
  const probed = async () => {
    running()
    const command = probe('readinessProbe')
    const run = spawn(command[0], command.slice(1), { env: { ...process.env, ...env }, stdio: 'ignore' })
    return new Promise<boolean>((resolve) => run.on('exit', (code) => resolve(code === 0)))
  }
  // Up to 30 s in all. The probe spawns five processes (sh, cat, timeout, redis-cli, grep): only once the port
  // accepts a connection, which costs next to nothing to try, and every 100 ms.
  const end = Date.now() + 30_000
  const ready = (await until(accepting, 30_000)) && (await until(probed, end - Date.now(), 100))
  if (!ready) throw new Error(`the manifest's Redis on port ${port} never passed its readiness probe`)
  const url = new URL(gatewayVariable('PAYMENTS_GATE_IDEMPOTENCY'))
  url.hostname = '127.0.0.1'
  url.port = String(port)
  return {
    url: url.href,
    port,
    password: SECRET_PASSWORDS['payments-gate-redis'] as string,
    env,
    probe,
    freeze: () => void child.kill('SIGSTOP'),
    thaw: () => void child.kill('SIGCONT'),
    kill: () => killed(child),
  }
}
