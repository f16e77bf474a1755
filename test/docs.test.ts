// The docs' steps that cannot run here as written, checked for what can be: the Kubernetes steps create every
// Secret and ConfigMap the manifests mount (with the keys they read) before `kubectl apply`, and the image's
// documented `docker run` lines work against the Dockerfile's ENTRYPOINT, CMD and ENV, run on dist/cli.js with
// their mounts as folders. Also the outputs the docs quote, and the README's command line in a clone. The
// examples that do run are run against the packed package by test/as-packed.test.ts.
import { spawn, spawnSync } from 'node:child_process'
import { cpSync, mkdirSync, readFileSync, readdirSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t, { type Test } from 'tap'
import { parseAllDocuments } from 'yaml'
import { runCli } from './helpers/cli.js'
import { uncovered } from './helpers/uncovered.js'
import { dockerfileStages, execForm, imageEnv } from './helpers/dockerfile.js'
import { POLICIES_DIR, writeCredentials } from './helpers/fixtures.js'
import { freePort, poll, startBackend } from './helpers/servers.js'
import { snippetsOf, type Snippet } from './helpers/snippets.js'

const repository = fileURLToPath(new URL('..', import.meta.url))
const read = (path: string) => readFileSync(join(repository, path), 'utf8')

const readme = snippetsOf('README.md')
const deployment = snippetsOf('docs/deployment.md')
const snippet = (docs: Map<string, Snippet>, name: string): Snippet => {
  const found = docs.get(name)
  if (found === undefined) throw new Error(`no snippet marked test: ${name}`)
  return found
}

/** A shell block's commands: continued lines joined, comments and blank lines dropped. */
function commands(block: Snippet): string[] {
  return block.code
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
}

/** Every object of deploy/*.yaml (promtool's *.test.yaml are not manifests). */
const objects = readdirSync(join(repository, 'deploy'))
  .filter((file) => file.endsWith('.yaml') && !file.endsWith('.test.yaml'))
  .flatMap((file) => parseAllDocuments(read(`deploy/${file}`)).map((document) => document.toJS()))

interface Volume {
  readonly name: string
  readonly secret?: { secretName: string; items?: { key: string; path: string }[] }
  readonly configMap?: { name: string }
}

interface Container {
  readonly name: string
  readonly image: string
  readonly env?: { name: string; value?: string }[]
  readonly volumeMounts?: { name: string; mountPath: string }[]
}

/** The pods of deploy/'s Deployments. */
const pods = objects
  .filter((object) => object.kind === 'Deployment')
  .map(
    (object) =>
      object.spec.template.spec as { volumes?: Volume[]; containers: Container[]; initContainers?: Container[] },
  )

/** What `kubectl create configmap|secret generic NAME --from-...` lines make: each name, with the keys it holds. */
function created(lines: readonly string[]): Map<string, Set<string>> {
  const made = new Map<string, Set<string>>()
  for (const line of lines) {
    const match = /^kubectl create (?:configmap|secret generic) (\S+) (.*)$/.exec(line)
    if (match === null) continue
    const keys = [...(match[2] as string).matchAll(/--from-(file|literal)=(\S+)/g)].map(([, kind, source]) => {
      const [first, ...rest] = (source as string).split('=')
      // --from-literal=KEY=VALUE and --from-file=KEY=PATH name their key; --from-file=PATH takes the file's name.
      return kind === 'literal' || rest.length > 0 ? (first as string) : basename(first as string)
    })
    made.set(match[1] as string, new Set(keys))
  }
  return made
}

for (const [page, docs, name] of [
  ['README.md', readme, 'readme-kubernetes'],
  ['docs/deployment.md', deployment, 'deployment-kubernetes'],
] as const) {
  t.test(`${page}: the steps before kubectl apply make every Secret and ConfigMap deploy/ mounts`, async (t) => {
    const lines = commands(snippet(docs, name))
    t.equal(lines.at(-1), 'kubectl apply -f deploy/', 'the steps end with the apply')
    const made = created(lines)
    /** Made by deploy/ itself: its ConfigMaps and Secrets, and the Secrets cert-manager's Certificates write. */
    const shipped = new Set(
      objects.flatMap((object) =>
        object.kind === 'Certificate'
          ? [object.spec.secretName]
          : ['ConfigMap', 'Secret'].includes(object.kind)
            ? [object.metadata.name]
            : [],
      ),
    )
    for (const pod of pods) {
      for (const volume of pod.volumes ?? []) {
        const source = volume.secret?.secretName ?? volume.configMap?.name
        if (source === undefined || shipped.has(source)) continue
        t.ok(made.has(source), `${source} is made before kubectl apply`)
        for (const item of volume.secret?.items ?? [])
          t.ok(
            made.get(source)?.has(item.key),
            `${source} holds the key ${item.key} that the volume ${volume.name} takes`,
          )
        // A file of the Secret a container is pointed at by a variable is a key the step makes.
        for (const container of [...pod.containers, ...(pod.initContainers ?? [])]) {
          const mount = container.volumeMounts?.find((candidate) => candidate.name === volume.name)
          if (mount === undefined || volume.secret === undefined) continue
          for (const variable of container.env ?? []) {
            if (variable.value === undefined || dirname(variable.value) !== mount.mountPath) continue
            const key = volume.secret.items?.find((item) => item.path === basename(variable.value as string))?.key
            t.ok(
              made.get(source)?.has(key ?? basename(variable.value)),
              `${variable.name}: ${variable.value} is a key of ${source}`,
            )
          }
        }
      }
    }
    const gateway = pods.flatMap((pod) => pod.containers).find((container) => container.name === 'payments-gate')
    const build = lines.find((line) => line.startsWith('docker build'))
    t.match(
      build,
      new RegExp(
        `^docker build -t ${gateway?.image.replaceAll('.', '\\.')} \\. && docker push ${gateway?.image.replaceAll('.', '\\.')}$`,
      ),
      'the image the Deployment runs is built and pushed',
    )
  })
}

t.test("docs/deployment.md explains each variable the gateway's container sets, beside the steps", async (t) => {
  const page = read('docs/deployment.md')
  const section = page.slice(page.indexOf('## Kubernetes'), page.indexOf('`deploy/payments.yaml`:'))
  const gateway = pods.flatMap((pod) => pod.containers).find((container) => container.name === 'payments-gate')
  for (const { name } of gateway?.env ?? []) t.ok(section.includes(`\`${name}\``), name)
})

/** The Dockerfile's final stage, as the image runs it. */
const final = dockerfileStages(read('Dockerfile')).at(-1) ?? []
const entrypoint = execForm(final, 'ENTRYPOINT')
const command = execForm(final, 'CMD')
const environment = imageEnv(final)

interface DockerRun {
  readonly image: string
  readonly ports: readonly (readonly [host: number, container: number])[]
  readonly mounts: readonly (readonly [host: string, container: string])[]
  readonly env: Readonly<Record<string, string>>
  readonly args: readonly string[]
}

/** A `docker run` line of the docs, read as docker reads the options it uses; another option fails the test. */
function dockerRun(line: string): DockerRun {
  const words = [...line.matchAll(/"([^"]*)"|(\S+)/g)].map(([, quoted, plain]) => (quoted ?? plain) as string)
  if (words.shift() !== 'docker' || words.shift() !== 'run') throw new Error(`not a docker run: ${line}`)
  const ports: [number, number][] = []
  const mounts: [string, string][] = []
  const env: Record<string, string> = {}
  for (let word = words.shift(); word !== undefined; word = words.shift()) {
    if (word === '--rm') continue
    if (word.startsWith('-') && !['-p', '-v', '-e'].includes(word))
      throw new Error(`${word}: an option the test does not read`)
    const value = words.shift() as string
    if (word === '-p') ports.push(value.split(':').map(Number) as [number, number])
    else if (word === '-v') mounts.push(value.split(':').slice(0, 2) as [string, string])
    else if (word === '-e') env[value.slice(0, value.indexOf('='))] = value.slice(value.indexOf('=') + 1)
    else return { image: word, ports, mounts, env, args: [value, ...words].filter((arg) => arg !== undefined) }
  }
  throw new Error(`no image in ${line}`)
}

/** The process a `docker run` starts: the ENTRYPOINT and the arguments (or CMD), the image's ENV under the -e's. */
function imageProcess(run: DockerRun): { argv: string[]; env: Record<string, string> } {
  return { argv: [...entrypoint, ...(run.args.length > 0 ? run.args : command)], env: { ...environment, ...run.env } }
}

/** The environment of the built code run here, outside the coverage of lib/ (test/bench.test.ts says why both). */
const { NODE_V8_COVERAGE: _, ...inherited } = process.env
const built = { ...inherited, _TAPJS_PROCESSINFO_COVERAGE_: '0' }

/** dist/cli.js run as the image runs it. */
function image(t: Test, argv: readonly string[], variables: Record<string, string>) {
  t.equal(argv[0], 'node')
  const env = { ...built, ...variables }
  const child = spawn(...uncovered(argv.slice(1), env), {
    cwd: repository,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve))
  t.teardown(() => void child.kill('SIGKILL'))
  return { child, exited, output: () => output }
}

t.test("docs/deployment.md's docker run lines work against the Dockerfile's ENTRYPOINT, CMD and ENV", async (t) => {
  const lines = [
    ...commands(snippet(deployment, 'deployment-docker')),
    ...commands(snippet(deployment, 'deployment-docker-arguments')),
  ]
  const tag = /^docker build -t (\S+) \.$/.exec(lines[0] as string)?.[1]
  const runs = lines.filter((line) => line.startsWith('docker run')).map(dockerRun)
  t.equal(runs.length, 3)
  const backend = await startBackend()
  t.teardown(() => backend.close())
  for (const run of runs) {
    await t.test(`docker run ${run.image} ${run.args.join(' ')}`, async (t) => {
      t.equal(run.image, tag, 'the image built above')
      // The mounts as folders: the repository's policies, the test user's credentials.
      const root = t.testdir({})
      const local = (path: string) => {
        const mount = run.mounts.find(([, container]) => path === container || path.startsWith(`${container}/`))
        return mount === undefined ? path : join(root, path)
      }
      for (const [host, container] of run.mounts) {
        mkdirSync(join(root, container), { recursive: true })
        if (host.endsWith('/policies')) cpSync(POLICIES_DIR, join(root, container), { recursive: true })
        else await writeCredentials(join(root, container))
      }
      const { argv, env } = imageProcess(run)
      const variables = Object.fromEntries(Object.entries(env).map(([name, value]) => [name, local(value)]))
      const args = argv.map(local)
      if (args[2] !== 'serve') {
        const other = image(t, args, variables)
        t.equal(await other.exited, 0, other.output())
        t.match(other.output(), /^4 valid policies in /, `${args.slice(2).join(' ')}`)
        return
      }
      // The ports each -p publishes are the ones the gateway listens on, here made free loopback ones.
      const published = run.ports.map(([, container]) => container).sort()
      const listened = ['PAYMENTS_GATE_LISTEN', 'PAYMENTS_GATE_ADMIN']
        .map((name) => Number(env[name]?.split(':').at(-1)))
        .sort()
      t.same(published, listened, 'the ports published are the ones served')
      const [listen, admin] = [await freePort(), await freePort()]
      Object.assign(variables, {
        PAYMENTS_GATE_LISTEN: `127.0.0.1:${listen}`,
        PAYMENTS_GATE_ADMIN: `127.0.0.1:${admin}`,
        PAYMENTS_GATE_TARGET: backend.url,
      })
      const gateway = image(t, args, variables)
      await Promise.race([
        poll(`http://127.0.0.1:${admin}/readyz`, 200),
        gateway.exited.then(() => Promise.reject(new Error(gateway.output()))),
      ])
      t.pass(`${args.slice(2).join(' ')}: ready`)
      // Ctrl-C skips the shutdown delay (docs/deployment-reference.md, stopping).
      gateway.child.kill('SIGINT')
      t.equal(await gateway.exited, 0, gateway.output())
    })
  }
})

t.test("docs/credentials.md quotes hash-password's warning as it is printed", async (t) => {
  const quoted = /with a warning on stderr:\n`([^`]+)`/.exec(read('docs/credentials.md'))?.[1]
  const { stderr } = await runCli(['hash-password'], 'eight ch')
  t.equal(stderr, `${quoted}\n`)
})

t.test('README: in a clone, the command line is npx payments-gate, or node dist/cli.js', async (t) => {
  const version = (JSON.parse(read('package.json')) as { version: string }).version
  // npx links the clone into its cache and runs its `prepare` there, the first time in a clone: a second build of
  // dist/ (tsc and the bundle, seconds of CPU) while other tests read it. The clone's dist/ is built (npm ci).
  const env = { ...built, npm_config_ignore_scripts: 'true' }
  const npx = spawnSync(...uncovered(['--no-install', 'payments-gate', '--version'], env, 'npx'), {
    cwd: repository,
    env,
    encoding: 'utf8',
  })
  t.equal(npx.stdout, `${version}\n`, npx.stderr)
  const node = spawnSync(...uncovered(['dist/cli.js', '--version'], env), { cwd: repository, env, encoding: 'utf8' })
  t.equal(node.stdout, `${version}\n`, node.stderr)
})
