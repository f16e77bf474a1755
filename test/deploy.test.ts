// The image and the manifests, short of building the image (no container engine runs on the machines
// the tests run on: docs/deployment.md, the image). The Dockerfile's command line and the Deployment's
// settings are run for real, against a local backend, with the mounts made into folders of the test.
import { cpSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import t from 'tap'
import { parseAllDocuments } from 'yaml'
import { spawnCli } from './helpers/cli.js'
import { saleBody, writeCredentials, POLICIES_DIR } from './helpers/fixtures.js'
import { paymentHeaders, send } from './helpers/http.js'
import { startRedis } from './helpers/redis.js'
import { freePort, poll, startBackend } from './helpers/servers.js'

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8')

interface Instruction {
  readonly keyword: string
  readonly argument: string
}

/** The Dockerfile's instructions, stage by stage (a stage starts at FROM); comments dropped, continued lines joined. */
function dockerfileStages(text: string): Instruction[][] {
  const stages: Instruction[][] = []
  const lines = text.replace(/\\\n/g, ' ').split('\n')
  for (const line of lines) {
    const match = /^\s*([A-Z]+)\s+(.*)$/.exec(line)
    if (match === null) continue
    const instruction = { keyword: match[1] as string, argument: (match[2] as string).trim() }
    if (instruction.keyword === 'FROM') stages.push([])
    stages.at(-1)?.push(instruction)
  }
  return stages
}

/** An instruction's exec form (a JSON array of strings); anything else fails the test. */
function execForm(stage: Instruction[], keyword: string): string[] {
  const found = stage.filter((instruction) => instruction.keyword === keyword)
  if (found.length !== 1) throw new Error(`the final stage needs exactly one ${keyword}`)
  return JSON.parse((found[0] as Instruction).argument) as string[]
}

/** The value of `--flag VALUE` or `--flag=VALUE` in a command line. */
function flag(args: string[], name: string): string {
  const i = args.findIndex((arg) => arg === `--${name}` || arg.startsWith(`--${name}=`))
  const value = args[i]?.includes('=') === true ? args[i]?.slice(name.length + 3) : args[i + 1]
  if (i < 0 || value === undefined) throw new Error(`--${name} is not in ${args.join(' ')}`)
  return value
}

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
const deployment = find('Deployment', 'payments')
const pod = deployment.spec.template.spec
const gateway = pod.containers.find((container: any) => container.name === 'payments-gate')
const portNamed = (name: string) => gateway.ports.find((port: any) => port.name === name)?.containerPort

t.test(
  'deploy/*.yaml parse as YAML, and hold the sidecar Deployment and Service, the Redis, the PodDisruptionBudget, the alert rules and the TLS Certificate',
  async (t) => {
    for (const [file, documents] of Object.entries(manifests)) {
      for (const document of Array.isArray(documents) ? documents : [documents]) t.same(document.errors, [], file)
    }
    t.same(objects.map((object) => `${object.kind} ${object.metadata.name}`).sort(), [
      'Certificate payments-gate-tls',
      'Deployment payments',
      'Deployment payments-gate-redis',
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
    for (const stage of stages) t.match(stage[0]?.argument, /^node:26-slim( AS \w+)?$/)
    t.ok(final.some((step) => step.keyword === 'RUN' && /\bnpm ci --omit=dev\b/.test(step.argument)))
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
    // Exec form, no shell in between: SIGTERM reaches node, which drains (docs/deployment.md, stopping).
    t.same(entrypoint, ['node', 'dist/cli.js'])
    t.equal(JSON.parse(read('package.json')).bin['payments-gate'], entrypoint[1], 'the package bin')
    t.equal(command[0], 'serve')
    const volumes = JSON.parse(final.find((step) => step.keyword === 'VOLUME')?.argument ?? '[]') as string[]
    t.same(
      volumes.sort(),
      [flag(command, 'policies'), dirname(flag(command, 'credentials'))].sort(),
      'the mounts the command reads',
    )
    const exposed = final
      .find((step) => step.keyword === 'EXPOSE')
      ?.argument.split(/\s+/)
      .map(Number)
    t.same(exposed, [portOf(flag(command, 'listen')), portOf(flag(command, 'admin'))])
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
    t.equal(portNamed('http'), portOf(flag(command, 'listen')))
    t.equal(portNamed('admin'), portOf(flag(command, 'admin')))
    t.same(gateway.readinessProbe.httpGet, { path: '/readyz', port: 'admin' })
    t.same(gateway.livenessProbe.httpGet, { path: '/healthz', port: 'admin' })
    const mounts = Object.fromEntries(gateway.volumeMounts.map((mount: any) => [mount.mountPath, mount.name]))
    const volume = (name: string) => pod.volumes.find((candidate: any) => candidate.name === name)
    t.match(volume(mounts[flag(command, 'policies')]), { configMap: { name: 'payments-gate-policies' } })
    t.match(volume(mounts[dirname(flag(command, 'credentials'))]), {
      secret: { secretName: 'payments-gate-credentials' },
    })
    t.equal(flag(command, 'credentials').split('/').at(-1), 'credentials.json', 'the key of the Secret')
    for (const mount of gateway.volumeMounts) t.equal(mount.readOnly, true)
    // Above the shutdown delay (5 s) plus the drain (--timeout + 1 s): docs/deployment.md, stopping.
    t.equal(pod.terminationGracePeriodSeconds, 45)
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
  t.equal(redisService.spec.ports[0].targetPort, redis.spec.template.spec.containers[0].ports[0].containerPort)
  t.match(redis.spec.template.spec.containers[0].args.join(' '), /--maxmemory-policy noeviction/)
})

t.test(
  "the image's command with the Deployment's variables serves a payment and a refusal, answers the probes, drains on SIGTERM",
  async (t) => {
    const backend = await startBackend()
    t.teardown(() => backend.close())
    const redis = await startRedis(t)
    // The mounts, as folders of the test: the policies of the repository, the test user's credentials.
    const root = t.testdir({})
    const mounted = (path: string) => join(root, path)
    mkdirSync(mounted(flag(command, 'policies')), { recursive: true })
    cpSync(POLICIES_DIR, mounted(flag(command, 'policies')), { recursive: true })
    mkdirSync(mounted(dirname(flag(command, 'credentials'))), { recursive: true })
    await writeCredentials(mounted(dirname(flag(command, 'credentials'))))
    const [listen, admin] = [await freePort(), await freePort()]
    const args = command.map((arg) => (arg.startsWith('/') ? mounted(arg) : arg))
    args[args.indexOf(flag(command, 'listen'))] = `127.0.0.1:${listen}`
    args[args.indexOf(flag(command, 'admin'))] = `127.0.0.1:${admin}`
    const keyFile = gateway.env.find((variable: any) => variable.name === 'PAYMENTS_GATE_IDEMPOTENCY_FINGERPRINT_KEY')
    mkdirSync(mounted(dirname(keyFile.value)), { recursive: true })
    writeFileSync(mounted(keyFile.value), `${'k'.repeat(32)}\n`)
    const local: Record<string, string> = {
      PAYMENTS_GATE_TARGET: backend.url,
      PAYMENTS_GATE_IDEMPOTENCY: redis?.url ?? 'memory',
      PAYMENTS_GATE_IDEMPOTENCY_FINGERPRINT_KEY: mounted(keyFile.value),
    }
    const env = Object.fromEntries(
      gateway.env.map(({ name, value }: { name: string; value: string }) => [name, local[name] ?? value]),
    )
    t.same(Object.keys(env).sort(), [
      'PAYMENTS_GATE_IDEMPOTENCY',
      'PAYMENTS_GATE_IDEMPOTENCY_FINGERPRINT_KEY',
      'PAYMENTS_GATE_TARGET',
      'PAYMENTS_GATE_VENDOR',
    ])
    const run = spawnCli([...args, '--shutdown-delay', '0'], env)
    t.teardown(() => void run.child.kill('SIGKILL'))
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
    run.child.kill('SIGTERM')
    t.equal(await run.exited, 0)
  },
)

t.test('docs/deployment.md: the base the Dockerfile names, and the rebuild that keeps it patched', async (t) => {
  const page = read('docs/deployment.md')
  const rebuilds = page.slice(page.indexOf('### Rebuilds'), page.indexOf('\n## ', page.indexOf('### Rebuilds')))
  const base = stages[0]?.[0]?.argument.split(' ')[0] as string
  t.ok(rebuilds.includes(`\`${base}\``), `the base, ${base}`)
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
