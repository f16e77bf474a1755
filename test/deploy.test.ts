// The image and the manifests, short of building the image (no container engine runs on the machines
// the tests run on: docs/deployment.md, the image). The Dockerfile's command line and the Deployment's
// settings are run for real, against a local backend, with the mounts made into folders of the test.
import { spawn, spawnSync } from 'node:child_process'
import { cpSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { Redis } from 'ioredis'
import t from 'tap'
import { parseAllDocuments } from 'yaml'
import { envName, flagName } from '../lib/cli/flags.js'
import { DEFAULTS } from '../lib/defaults.js'
import { storePassword } from '../lib/cli/startup.js'
import { createIdempotencyStore } from '../lib/idempotency/create-store.js'
import type { RedisIdempotencyStore } from '../lib/idempotency/redis.js'
import { RedisLoginThrottle } from '../lib/login-throttle-redis.js'
import { RedisRateLimitStore } from '../lib/rate-limit/redis.js'
import { inFlightWindowMs, UNKNOWN_ANSWER } from '../lib/proxy/retry-protection.js'
import { boundPorts, spawnCli } from './helpers/cli.js'
import { dockerfileStages, execForm, imageEnv, type Instruction } from './helpers/dockerfile.js'
import { saleBody, writeCredentials, POLICIES_DIR } from './helpers/fixtures.js'
import { paymentHeaders, send } from './helpers/http.js'
import { startManifestRedis } from './helpers/manifest-redis.js'
import { endsWithThisProcess, freePort, poll, startBackend } from './helpers/servers.js'

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8')

const portOf = (address: string) => Number(address.slice(address.lastIndexOf(':') + 1))

const manifests = Object.fromEntries(
  readdirSync(new URL('../deploy/', import.meta.url))
    // *.test.yaml: promtool's unit tests of the alert rules, not a manifest (test/deploy-observability.test.ts).
    .filter((file) => file.endsWith('.yaml') && !file.endsWith('.test.yaml'))
    .map((file) => [file, parseAllDocuments(read(`deploy/${file}`))]),
)
/** Every manifest of deploy/, as plain objects. */
const objects = Object.values(manifests).flatMap((documents) =>
  (Array.isArray(documents) ? documents : [documents]).map((document) => document.toJS()),
)
const find = (kind: string, name: string) => {
  const found = objects.find((object) => object.kind === kind && object.metadata?.name === name)
  if (found === undefined) throw new Error(`deploy/ has no ${kind} ${name}`)
  return found
}

const stages = dockerfileStages(read('Dockerfile'))
const final = stages.at(-1) as Instruction[]
const entrypoint = execForm(final, 'ENTRYPOINT')
const command = execForm(final, 'CMD')
const environment = imageEnv(final)
/** A setting of the image's `serve`: its variable, which `docker run -e` changes (docs/deployment.md, the image). */
const setting = (key: string): string => {
  const value = environment[envName(key)]
  if (value === undefined) throw new Error(`the image sets no ${envName(key)}`)
  return value
}
const deployment = find('Deployment', 'payments')
const pod = deployment.spec.template.spec
const gateway = pod.containers.find((container: any) => container.name === 'payments-gate')
const portNamed = (name: string) => gateway.ports.find((port: any) => port.name === name)?.containerPort
const gatewayVariable = (name: string): string => gateway.env.find((variable: any) => variable.name === name).value
t.test(
  'deploy/*.yaml parse as YAML, and hold the sidecar Deployment and Service, the Redis, the PodDisruptionBudget, the alert rules and the TLS Certificate',
  async (t) => {
    for (const [file, documents] of Object.entries(manifests)) {
      for (const document of Array.isArray(documents) ? documents : [documents]) t.same(document.errors, [], file)
    }
    t.same(objects.map((object) => `${object.kind} ${object.metadata.name}`).sort(), [
      'Certificate payments-gate-tls',
      'ConfigMap payments-gate-redis-acl',
      'Deployment payments',
      'Deployment payments-gate-redis',
      'NetworkPolicy payments',
      'NetworkPolicy payments-gate-redis',
      'PodDisruptionBudget payments',
      'PrometheusRule payments-gate',
      'Service payments',
      'Service payments-gate-redis',
    ])
  },
)

t.test(
  'Dockerfile: multi-stage on a slim Node 26, npm ci --omit=dev in the final stage, non-root, node as PID 1',
  async (t) => {
    t.ok(stages.length >= 2, 'a build stage and a final stage')
    // An exact Node 26 release and the digest of its image: the build never takes a base nobody chose.
    for (const stage of stages) t.match(stage[0]?.argument, /^node:26\.\d+\.\d+-slim@sha256:[0-9a-f]{64}( AS \w+)?$/)
    t.ok(final.some((step) => step.keyword === 'RUN' && /\bnpm ci --omit=dev --ignore-scripts\b/.test(step.argument)))
    t.notOk(
      final.some((step) => step.keyword === 'RUN' && /npm ci(?! --omit=dev)/.test(step.argument)),
      'no dev dependencies in the final stage',
    )
    t.match(
      final.find((step) => step.keyword === 'COPY' && step.argument.includes('/app/dist')),
      { argument: /^--from=build / },
    )
    const user = final.findLast((step) => step.keyword === 'USER')?.argument
    t.ok(user !== undefined && !/^(root|0)(:|$)/.test(user), `non-root user: ${user}`)
    // Exec form, no shell in between: SIGTERM reaches node, which drains (docs/deployment-reference.md, stopping).
    t.same(entrypoint, ['node', 'dist/cli.js'])
    t.equal(JSON.parse(read('package.json')).bin['payments-gate'], entrypoint[1], 'the package bin')
    t.same(command, ['serve'], 'the command alone: arguments after the image name replace it, the settings stay')
    const volumes = JSON.parse(final.find((step) => step.keyword === 'VOLUME')?.argument ?? '[]') as string[]
    t.same(volumes.sort(), [setting('policies'), dirname(setting('credentials'))].sort(), 'the mounts serve reads')
    const exposed = final
      .find((step) => step.keyword === 'EXPOSE')
      ?.argument.split(/\s+/)
      .map(Number)
    t.same(exposed, [portOf(setting('listen')), portOf(setting('admin'))])
    // Red before: `demo`, and start-up's hint for a policy folder it cannot read, named a folder the image had not.
    t.ok(
      final.some((step) => step.keyword === 'COPY' && step.argument === 'policies ./policies'),
      'the sample policies where the package has them',
    )
  },
)

t.test('.dockerignore keeps node_modules, dist/, secrets and test output out of the build context', async (t) => {
  const lines = read('.dockerignore')
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'))
  t.equal(lines[0], '*', 'everything ignored, then what the Dockerfile copies let in')
  for (const line of lines.slice(1)) t.match(line, /^!/)
  const copied = stages.flat().filter((step) => step.keyword === 'COPY' && !step.argument.startsWith('--from'))
  for (const step of copied) {
    for (const source of step.argument.split(/\s+/).slice(0, -1))
      t.ok(
        lines.some((line) => line.startsWith(`!${source}`)),
        `${source} reaches the build`,
      )
  }
})

t.test(
  'the Deployment runs the image as built: its ports, probes, mounts and variables fit the Dockerfile and serve',
  async (t) => {
    t.equal(gateway.command, undefined, 'the image ENTRYPOINT')
    t.equal(gateway.args, undefined, 'the image CMD')
    t.match(gateway.image, /\/payments-gate:/)
    t.equal(portNamed('http'), portOf(setting('listen')))
    t.equal(portNamed('admin'), portOf(setting('admin')))
    t.same(gateway.readinessProbe.httpGet, { path: '/readyz', port: 'admin' })
    t.same(gateway.livenessProbe.httpGet, { path: '/healthz', port: 'admin' })
    const mounts = Object.fromEntries(gateway.volumeMounts.map((mount: any) => [mount.mountPath, mount.name]))
    const volume = (name: string) => pod.volumes.find((candidate: any) => candidate.name === name)
    t.match(volume(mounts[setting('policies')]), { configMap: { name: 'payments-gate-policies' } })
    t.match(volume(mounts[dirname(setting('credentials'))]), {
      secret: { secretName: 'payments-gate-credentials' },
    })
    t.equal(setting('credentials').split('/').at(-1), 'credentials.json', 'the key of the Secret')
    for (const mount of gateway.volumeMounts) t.equal(mount.readOnly, true)
    t.equal(gateway.securityContext.runAsNonRoot, true)
    const cli = read('docs/cli.md')
    for (const { name } of gateway.env)
      t.ok(cli.includes(`| \`${name}\` |`), `${name} is a variable of serve (docs/cli.md)`)
    const service = find('Service', 'payments')
    t.same(service.spec.selector, deployment.spec.selector.matchLabels)
    t.same(
      service.spec.ports.map((port: any) => port.targetPort),
      ['http'],
    )
    t.equal(Number(service.metadata.annotations['prometheus.io/port']), portNamed('admin'))
  },
)

t.test('the PodDisruptionBudget and the Redis select what they should', async (t) => {
  const budget = find('PodDisruptionBudget', 'payments')
  t.same(budget.spec.selector.matchLabels, deployment.spec.selector.matchLabels)
  t.ok(budget.spec.maxUnavailable < deployment.spec.replicas)
  const redis = find('Deployment', 'payments-gate-redis')
  const redisService = find('Service', 'payments-gate-redis')
  t.same(redisService.spec.selector, redis.spec.template.metadata.labels)
  const store = new URL(gateway.env.find((variable: any) => variable.name === 'PAYMENTS_GATE_IDEMPOTENCY').value)
  t.equal(store.hostname, 'payments-gate-redis')
  t.equal(Number(store.port), redisService.spec.ports[0].port)
  t.equal(redisService.spec.ports[0].targetPort, redis.spec.template.spec.containers[0].ports[0].name)
  t.equal(redisService.spec.ports[0].port, redis.spec.template.spec.containers[0].ports[0].containerPort)
  t.match(redis.spec.template.spec.containers[0].args.join(' '), /--maxmemory-policy noeviction/)
})

t.test(
  "the image's command with the Deployment's variables serves a payment and a refusal, answers the probes, drains on SIGTERM",
  async (t) => {
    const backend = await startBackend()
    t.teardown(() => backend.close())
    const redis = await startManifestRedis(t)
    // The mounts, as folders of the test: the policies of the repository, the test user's credentials, the Redis password.
    const root = t.testdir({})
    const mounted = (path: string) => join(root, path)
    mkdirSync(mounted(setting('policies')), { recursive: true })
    cpSync(POLICIES_DIR, mounted(setting('policies')), { recursive: true })
    mkdirSync(mounted(dirname(setting('credentials'))), { recursive: true })
    await writeCredentials(mounted(dirname(setting('credentials'))))
    const passwordFile = gatewayVariable('PAYMENTS_GATE_IDEMPOTENCY_PASSWORD_FILE')
    mkdirSync(mounted(dirname(passwordFile)), { recursive: true })
    writeFileSync(mounted(passwordFile), redis.password)
    // The image's settings, its paths made the test's folders, its ports free ones the gateway picks.
    const settings = Object.fromEntries(
      Object.entries(environment).map(([name, value]) => [name, value.startsWith('/') ? mounted(value) : value]),
    )
    Object.assign(settings, {
      [envName('listen')]: '127.0.0.1:0',
      [envName('admin')]: '127.0.0.1:0',
    })
    const keyFile = gateway.env.find((variable: any) => variable.name === 'PAYMENTS_GATE_IDEMPOTENCY_FINGERPRINT_KEY')
    mkdirSync(mounted(dirname(keyFile.value)), { recursive: true })
    writeFileSync(mounted(keyFile.value), `${'k'.repeat(32)}\n`)
    const local: Record<string, string> = {
      PAYMENTS_GATE_TARGET: backend.url,
      PAYMENTS_GATE_IDEMPOTENCY: redis.url,
      PAYMENTS_GATE_IDEMPOTENCY_PASSWORD_FILE: mounted(passwordFile),
      PAYMENTS_GATE_IDEMPOTENCY_FINGERPRINT_KEY: mounted(keyFile.value),
    }
    const env = Object.fromEntries(
      gateway.env.map(({ name, value }: { name: string; value: string }) => [name, local[name] ?? value]),
    )
    t.same(Object.keys(env).sort(), [
      'PAYMENTS_GATE_IDEMPOTENCY',
      'PAYMENTS_GATE_IDEMPOTENCY_FINGERPRINT_KEY',
      'PAYMENTS_GATE_IDEMPOTENCY_PASSWORD_FILE',
      'PAYMENTS_GATE_TARGET',
      'PAYMENTS_GATE_VENDOR',
    ])
    const run = spawnCli([...command, '--shutdown-delay', '0'], { ...settings, ...env })
    t.teardown(() => void run.child.kill('SIGKILL'))
    const { listen, admin } = await boundPorts(run)
    await poll(`http://127.0.0.1:${admin}${gateway.readinessProbe.httpGet.path}`, 200)
    t.equal((await fetch(`http://127.0.0.1:${admin}${gateway.livenessProbe.httpGet.path}`)).status, 200)
    const payment = await send(listen, {
      headers: paymentHeaders(),
      body: saleBody({ transactionReference: 'image-1' }),
    })
    t.equal(payment.status, 201)
    const refusal = await send(listen, { headers: paymentHeaders(), body: saleBody({ transactionReference: 42 }) })
    t.equal(refusal.status, 400)
    t.equal(refusal.json.errorName, 'bodyDoesNotMatchSchema')
    t.equal(backend.received.length, 1, 'the refusal never reached the backend')
    const replay = await send(listen, {
      headers: paymentHeaders(),
      body: saleBody({ transactionReference: 'image-1' }),
    })
    t.equal(replay.headers['idempotent-replayed'], 'true', "replayed from the manifest's Redis, through its ACL user")
    t.equal(backend.received.length, 1)
    run.child.kill('SIGTERM')
    t.equal(await run.exited, 0)
  },
)

t.test('docs/deployment.md: the base the Dockerfile names, and the rebuild that keeps it patched', async (t) => {
  const page = read('docs/deployment.md')
  const rebuilds = page.slice(page.indexOf('### Rebuilds'), page.indexOf('\n## ', page.indexOf('### Rebuilds')))
  const base = stages[0]?.[0]?.argument.split(' ')[0] as string
  t.ok(rebuilds.includes(`\`${base}\``), `the base, ${base}`)
  t.match(rebuilds, /digest/, 'and how its digest is moved')
  t.match(rebuilds, /`docker build --pull`/, 'the base fetched again at each rebuild')
  t.match(rebuilds, /once a week/, 'a schedule')
  t.match(rebuilds, /security release/, 'and a rebuild on a security release')
})

t.test(
  'the docs quote deploy/ rather than restate it: every YAML block of theirs is in a file of deploy/',
  async (t) => {
    const files = Object.keys(manifests).map((file) => read(`deploy/${file}`))
    for (const page of ['docs/deployment.md', 'docs/idempotency.md']) {
      const blocks = [...read(page).matchAll(/```yaml\n([\s\S]*?)```/g)].map((match) => match[1] as string)
      t.ok(blocks.length > 0, `${page} shows the manifests`)
      for (const block of blocks)
        t.ok(
          files.some((file) => file.includes(block)),
          `${page}: a block not quoted from deploy/:\n${block}`,
        )
    }
  },
)

t.test(
  "the manifest's Redis: the store, the throttle and the rate limit work through its ACL user, with the password from a file; the default user and anything else are refused",
  async (t) => {
    const redis = await startManifestRedis(t)
    const file = join(t.testdir({ password: `${redis.password}\n` }), 'password')
    const password = await storePassword(file, redis.url, flagName)
    const errors: unknown[] = []
    const store = createIdempotencyStore(redis.url, {
      ttlMs: 60_000,
      inFlightMs: 60_000,
      oversizedAnswer: UNKNOWN_ANSWER,
      unknownAnswer: UNKNOWN_ANSWER,
      password,
      onError: (error) => errors.push(error),
    }) as RedisIdempotencyStore
    t.teardown(() => store.close())
    t.ok(await store.ready(10_000), 'connected as its user')
    const claim = await store.claim('acl-1', 'fingerprint')
    t.equal(claim.state, 'claimed')
    const answer = { status: 201, headers: ['content-type', 'application/json'], body: Buffer.from('{}') }
    await store.record('acl-1', (claim as { token: string }).token, answer)
    t.match(await store.claim('acl-1', 'fingerprint'), { state: 'recorded', answer: { status: 201 } })
    const released = await store.claim('acl-2', 'fingerprint')
    await store.release('acl-2', (released as { token: string }).token)
    t.equal((await store.claim('acl-2', 'fingerprint')).state, 'claimed', 'released, claimed again')
    const throttle = new RedisLoginThrottle(store.redis, { maxFailures: 2, onError: (error) => errors.push(error) })
    // Every path of the throttle's two scripts: reserve, refuse while reserved, give back, fail, lock, succeed.
    const reserved = [await throttle.admit('acl-user'), await throttle.admit('acl-user')]
    t.equal(await throttle.admit('acl-user'), undefined, 'two reservations: the limit, reserved in Redis')
    for (const attempt of reserved) await attempt?.settle(undefined)
    for (let i = 0; i < 2; i++) await (await throttle.admit('acl-user'))?.settle(false)
    t.equal(await throttle.admit('acl-user'), undefined, 'locked out after two failures, counted in Redis')
    await (await throttle.admit('acl-other'))?.settle(true)
    // Every path of the rate limit's script and its refund: admitted, a repeat, refused, given back.
    const limit = new RedisRateLimitStore(store.redis)
    const one = { payments: 1, seconds: 60 }
    t.match(await limit.take('acl-entity', one, 'a'), { admitted: true })
    t.match(await limit.take('acl-entity', one, 'a'), { admitted: true, counted: 1 })
    t.match(await limit.take('acl-entity', one, 'b'), { admitted: false })
    await limit.refund('acl-entity', 'a')
    t.match(await limit.take('acl-entity', one, 'c'), { admitted: true }, 'the rate limit runs through the ACL user')
    t.same(errors, [], 'no command refused')
    await t.rejects(store.redis.get('elsewhere'), /NOPERM/, 'no key outside payments-gate:*')
    await t.rejects(store.redis.flushall(), /NOPERM/, 'no command the gateway does not send')
    await t.rejects(store.redis.keys('payments-gate:*'), /NOPERM/, 'no listing of the keys')
    const anonymous = new Redis({ port: redis.port, host: '127.0.0.1', lazyConnect: true, enableReadyCheck: false })
    t.teardown(() => anonymous.disconnect())
    await anonymous.connect()
    await t.rejects(anonymous.ping(), /NOAUTH/, 'no connection without the user')
    await t.rejects(anonymous.auth('default', redis.password), /WRONGPASS/, 'the default user is off')
  },
)

t.test("the image's HEALTHCHECK asks /healthz wherever --admin or PAYMENTS_GATE_ADMIN put it, in node", async (t) => {
  const found = final.filter((step) => step.keyword === 'HEALTHCHECK')
  t.equal(found.length, 1)
  const check = JSON.parse((found[0] as Instruction).argument.replace(/^(--\S+\s+)*CMD\s+/, '')) as string[]
  t.equal(check[0], 'node', 'no curl in the image')
  t.ok(
    final.some((step) => step.keyword === 'COPY' && step.argument.split(/\s+/).includes(check[1] as string)),
    'its script is in the image',
  )
  // Through env(1) without NODE_OPTIONS, where tap puts its process tracking: the script ships in the image,
  // and the suite's coverage is that of lib/.
  const healthy = (pid: number) =>
    spawnSync('env', ['-u', 'NODE_OPTIONS', process.execPath, ...check.slice(1), String(pid)], {
      cwd: new URL('..', import.meta.url),
    }).status
  const admin = await freePort()
  // Where the variable points and nothing listens. Not port 1: a gateway run as root binds it, and other test files
  // take 127.0.0.1:1 for an address nothing answers.
  const nothing = `127.0.0.1:${await freePort()}`
  const backend = await startBackend()
  t.teardown(() => backend.close())
  const credentials = await writeCredentials(t.testdir())
  const flagged = spawnCli(
    [
      'serve',
      '--listen',
      '127.0.0.1:0',
      '--target',
      backend.url,
      '--credentials',
      credentials,
      `--admin=127.0.0.1:${admin}`,
    ],
    { PAYMENTS_GATE_ADMIN: nothing, PAYMENTS_GATE_SHUTDOWN_DELAY: '0' },
  )
  t.teardown(() => void flagged.child.kill('SIGKILL'))
  // The script reads the port from the command line, so it is given there; a bind that failed shows here, not as a timeout.
  await flagged.waitFor(/"msg":"gateway listening"/)
  await poll(`http://127.0.0.1:${admin}/healthz`, 200)
  t.equal(healthy(flagged.child.pid as number), 0, 'the flag wins over the variable')
  // A process with a gateway's command line whose admin setting is the variable, pointing at the listener above: a
  // shell waiting on its open stdin, as the script reads only /proc.
  const gatewayArgs = ['serve', '--target', backend.url, '--credentials', credentials]
  const variable = endsWithThisProcess(
    spawn('sh', ['-c', 'read _', 'gateway', ...gatewayArgs], {
      env: { ...process.env, PAYMENTS_GATE_ADMIN: `0.0.0.0:${admin}` },
      stdio: ['pipe', 'ignore', 'ignore'],
    }),
  )
  t.teardown(() => void variable.kill('SIGKILL'))
  t.equal(healthy(variable.pid as number), 0, 'the variable; every interface asked on loopback')
  flagged.child.kill('SIGTERM')
  t.equal(await flagged.exited, 0)
  t.equal(healthy(variable.pid as number), 1, 'unhealthy once nothing answers')
})

t.test('the packed JavaScript names no source map: the build emits none', async (t) => {
  const build = JSON.parse(read('tsconfig.build.json'))
  t.equal(build.compilerOptions.sourceMap, false)
  t.notOk(build.compilerOptions.declarationMap, 'nor declaration maps')
})

/** Every pod template of deploy/, with the object it belongs to. */
const pods = objects
  .filter((object) => object.spec?.template?.spec !== undefined)
  .map((object) => ({ name: `${object.kind} ${object.metadata.name}`, spec: object.spec.template.spec }))

t.test(
  'every pod of deploy/ meets Pod Security Standards "restricted", without a service account token or service links',
  async (t) => {
    t.ok(pods.length >= 2)
    for (const { name, spec } of pods) {
      t.equal(spec.automountServiceAccountToken, false, `${name}: no service account token`)
      t.equal(spec.enableServiceLinks, false, `${name}: no service variables`)
      for (const field of ['hostNetwork', 'hostPID', 'hostIPC']) t.notOk(spec[field], `${name}: no ${field}`)
      t.notOk(
        (spec.volumes ?? []).some((volume: any) => volume.hostPath !== undefined),
        `${name}: no hostPath volume`,
      )
      const containers = [...(spec.initContainers ?? []), ...spec.containers]
      for (const container of containers) {
        const at = `${name}, container ${container.name}`
        const own = container.securityContext ?? {}
        const pod = spec.securityContext ?? {}
        t.equal(own.runAsNonRoot ?? pod.runAsNonRoot, true, `${at}: runAsNonRoot`)
        const user = own.runAsUser ?? pod.runAsUser
        t.ok(Number.isInteger(user) && user > 0, `${at}: a numeric user, not root (${user})`)
        t.equal(own.allowPrivilegeEscalation, false, `${at}: allowPrivilegeEscalation false`)
        t.notOk(own.privileged, `${at}: not privileged`)
        t.same(own.capabilities?.drop, ['ALL'], `${at}: every capability dropped`)
        t.same(own.capabilities?.add ?? [], [], `${at}: none added`)
        t.match((own.seccompProfile ?? pod.seccompProfile)?.type, /^(RuntimeDefault|Localhost)$/, `${at}: seccomp`)
        t.notOk(
          (container.ports ?? []).some((port: any) => port.hostPort !== undefined),
          `${at}: no hostPort`,
        )
        t.equal(own.readOnlyRootFilesystem, true, `${at}: a read-only root`)
        t.ok(container.resources?.limits?.memory, `${at}: a memory limit`)
      }
    }
  },
)

t.test(
  'the backend is a native sidecar: started first and ready before the gateway starts, stopped after it',
  async (t) => {
    const backend = pod.initContainers.find((container: any) => container.name === 'backend')
    t.equal(backend.restartPolicy, 'Always')
    t.ok(
      backend.startupProbe.exec.command.length > 0,
      "an exec probe: it listens on loopback, out of the kubelet's reach",
    )
    t.notOk(pod.containers.some((container: any) => container.name === 'backend'))
    t.equal(new URL(gatewayVariable('PAYMENTS_GATE_TARGET')).hostname, '127.0.0.1')
    for (const constraint of pod.topologySpreadConstraints)
      t.same(constraint.labelSelector.matchLabels, deployment.spec.selector.matchLabels, constraint.topologyKey)
    t.same(
      pod.topologySpreadConstraints.map((constraint: any) => constraint.topologyKey),
      ['kubernetes.io/hostname', 'topology.kubernetes.io/zone'],
    )
  },
)

t.test(
  'terminationGracePeriodSeconds covers the shutdown delay, the drain and the trace flush, and docs/deployment-reference.md gives the same figures',
  async (t) => {
    const delay = DEFAULTS.shutdownDelaySeconds
    const drain = Math.ceil(inFlightWindowMs(DEFAULTS.timeout) / 1000)
    const flush = DEFAULTS.traceFlushMs / 1000
    t.ok(pod.terminationGracePeriodSeconds > delay + drain + flush, `${pod.terminationGracePeriodSeconds} s`)
    const page = read('docs/deployment-reference.md')
    t.ok(page.includes(`${delay} + ${drain} + ${flush} = ${delay + drain + flush} s`), 'the sum')
    t.ok(page.includes(`\`terminationGracePeriodSeconds\`: ${pod.terminationGracePeriodSeconds}`), 'the figure')
  },
)

t.test(
  'the NetworkPolicies: clients on 8080 and Prometheus on the admin port reach the gateways; only the gateways reach Redis',
  async (t) => {
    const gatewayPolicy = find('NetworkPolicy', 'payments')
    t.same(gatewayPolicy.spec.podSelector.matchLabels, deployment.spec.selector.matchLabels)
    t.same(gatewayPolicy.spec.policyTypes, ['Ingress'])
    t.same(
      gatewayPolicy.spec.ingress.map((rule: any) => rule.ports.map((port: any) => port.port)),
      [[portNamed('http')], [portNamed('admin')]],
    )
    for (const rule of gatewayPolicy.spec.ingress) t.ok(rule.from.length > 0, 'each from named sources only')
    const redisPolicy = find('NetworkPolicy', 'payments-gate-redis')
    t.same(
      redisPolicy.spec.podSelector.matchLabels,
      find('Deployment', 'payments-gate-redis').spec.selector.matchLabels,
    )
    t.same(redisPolicy.spec.ingress, [
      {
        ports: [{ port: 6379, protocol: 'TCP' }],
        from: [{ podSelector: { matchLabels: deployment.spec.selector.matchLabels } }],
      },
    ])
    t.same(redisPolicy.spec.egress, [], 'Redis reaches nothing')
    for (const file of ['payments.yaml', 'redis.yaml'])
      t.match(
        read(`deploy/${file}`),
        /Enforced only by a CNI that enforces\s+(# )?NetworkPolicy/,
        `${file} says what enforces it`,
      )
  },
)

/**
 * A backend in a process of its own: 201 to every payment, a second late to one whose reference starts with `slow-`
 * (it says so on stdout when it has one). On SIGTERM it exits at once (node's default): a backend that does not drain.
 */
const BACKEND = `
import { createServer } from 'node:http'
const server = createServer((req, res) => {
  const chunks = []
  req.on('data', (chunk) => chunks.push(chunk))
  req.on('end', () => {
    const slow = Buffer.concat(chunks).toString().includes('"slow-')
    if (slow) process.stdout.write('slow payment received\\n')
    setTimeout(() => {
      res.writeHead(201, { 'content-type': 'application/vnd.example.payments-v6.hal+json' })
      res.end('{"outcome":"authorized"}')
    }, slow ? 1000 : 0)
  })
})
server.listen(0, '127.0.0.1', () => process.stdout.write('listening ' + server.address().port + '\\n'))
`

t.test(
  'a pod stop as deploy/payments.yaml orders it (the gateway first, the backend once the gateway exited): no 503 during the delay, no unknown outcome',
  async (t) => {
    // The order the manifest gives: a native sidecar is stopped after every regular container has exited; a regular
    // container with the gateway would be signalled with it.
    const sidecar = pod.initContainers?.some(
      (container: any) => container.name === 'backend' && container.restartPolicy === 'Always',
    )
    t.ok(sidecar, 'the backend outlives the gateway')
    // The test's own backend: plain node, none of tap's coverage in it.
    const backend = endsWithThisProcess(
      spawn('env', ['-u', 'NODE_OPTIONS', process.execPath, '--input-type=module', '-e', BACKEND], {
        stdio: ['ignore', 'pipe', 'inherit'],
      }),
    )
    t.teardown(() => void backend.kill('SIGKILL'))
    const backendExited = new Promise((resolve) => backend.once('exit', resolve))
    let said = ''
    const heard = (pattern: RegExp) =>
      new Promise<RegExpExecArray>((resolve, reject) => {
        void backendExited.then(() => reject(new Error(`the backend exited before it said ${pattern}`)))
        const look = () => {
          const match = pattern.exec(said)
          if (match === null) return false
          backend.stdout.off('data', listen)
          resolve(match)
          return true
        }
        const listen = (chunk: Buffer) => {
          said += chunk.toString()
          look()
        }
        if (!look()) backend.stdout.on('data', listen)
      })
    const backendPort = (await heard(/listening (\d+)/))[1] as string
    const credentials = await writeCredentials(t.testdir())
    const run = spawnCli(['serve', '--listen', '127.0.0.1:0', '--credentials', credentials, '--admin', '127.0.0.1:0'], {
      PAYMENTS_GATE_TARGET: gatewayVariable('PAYMENTS_GATE_TARGET').replace(':9000', `:${backendPort}`),
      PAYMENTS_GATE_IDEMPOTENCY: 'memory',
      // Longer than the test: the delay is ended below, by a second SIGTERM, once the load has run through it.
      PAYMENTS_GATE_SHUTDOWN_DELAY: '600',
    })
    t.teardown(() => void run.child.kill('SIGKILL'))
    const { listen, admin } = await boundPorts(run)
    const url = `http://127.0.0.1:${listen}`
    let reference = 0
    const pay = (prefix = 'stop-') =>
      send(url, { headers: paymentHeaders(), body: saleBody({ transactionReference: `${prefix}${++reference}` }) })
    const stop = () => {
      run.child.kill('SIGTERM')
      if (!sidecar) backend.kill('SIGTERM')
    }
    t.equal((await pay()).status, 201)
    stop()
    await poll(`http://127.0.0.1:${admin}/readyz`, 503)
    // The delay: new connections still arrive while the news spreads; each is served.
    const during = await Promise.all(Array.from({ length: 40 }, () => pay()))
    t.same(new Set(during.map((reply) => reply.status)), new Set([201]), 'every payment of the delay served')
    // A payment in flight when the drain starts is answered, not cut.
    const inFlight = pay('slow-')
    await heard(/slow payment received/)
    run.child.kill('SIGTERM')
    const last = await inFlight
    t.equal(last.status, 201, 'the payment in flight when the drain began')
    t.equal(await run.exited, 0)
    t.equal(backend.exitCode, null, 'the backend still runs after the gateway')
    // The kubelet stops the sidecar once the gateway has exited.
    if (sidecar) backend.kill('SIGTERM')
    await backendExited
    const unknown = [...during, last].filter((reply) => reply.status === 500)
    t.same(unknown, [], 'no unknown outcome')
  },
)
