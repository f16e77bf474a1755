// The package as a user gets it: `npm pack`, then `npm install --omit=dev` of the tarball into an empty folder
// outside the repository (docs/deployment.md, the package). Dependencies come from the npm registry, through npm's
// cache when it holds them: the frameworks and @types/node at the versions the repository's lock installed. It packs
// the dist/ that `npm ci` built (the `prepare` script), as test/bench.test.ts runs it: rebuilding here would race the
// other tests reading it. Then it follows the docs as a user does, doctest-like (test/helpers/snippets.ts): the
// README's command lines, and every TypeScript example of the README and docs/ compiled together with `tsc --strict`
// (no skipLibCheck) and run with one request each. One pack, two projects, as a user makes them: the package installed
// alone (it serves, and its declarations compile without any framework), then a copy of that project where the three
// frameworks are added with a second `npm install`, where the README's lines and the examples run. One `tsc -b`
// compiles both projects, a program each, as soon as both are installed, while the tests before it run; the examples
// run side by side, each on its own port. The suite's longest file by far: named to sort second, as tap starts its files in name order, so that
// it runs beside the others from the start rather than after them (docs/development.md, tests).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import t, { type Test } from 'tap'
import { basic, saleBody, writeCredentials } from './helpers/fixtures.js'
import { paymentHeaders, send, until, type Reply } from './helpers/http.js'
import { startRedis } from './helpers/redis.js'
import { accepts, freePort, poll, startBackend } from './helpers/servers.js'
import { snippetsOf, substituted, type Snippet } from './helpers/snippets.js'

const repository = fileURLToPath(new URL('..', import.meta.url))
const lib = join(repository, 'lib')

/** Nothing of the test run leaks into npm or the gateway: no tap hooks, no coverage, no npm_config_* of the outer `npm test`. */
const env = Object.fromEntries(
  Object.entries(process.env).filter(([name]) => !/^(NODE_OPTIONS|NODE_V8_COVERAGE|npm_|TAP|_TAPJS)/i.test(name)),
)

function npm(args: string[], cwd: string) {
  const run = spawnSync('npm', [...args, '--no-audit', '--no-fund'], { cwd, env, encoding: 'utf8', timeout: 100_000 })
  if (run.status !== 0) throw new Error(`npm ${args.join(' ')}: ${run.status}\n${run.stderr}`)
  return run.stdout
}

/** A command run to its end without blocking the tests; killed after `timeout` ms. */
function finished(command: string, args: string[], cwd: string, timeout: number) {
  return new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(command, args, { cwd, env, timeout, stdio: ['ignore', 'pipe', 'pipe'] })
    let [stdout, stderr] = ['', '']
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.on('close', (status) => resolve({ status, stdout, stderr }))
  })
}

/** A package at the version the repository's lock installed, so that npm finds it in its cache. */
function locked(name: string): string {
  const manifest = JSON.parse(readFileSync(join(repository, 'node_modules', name, 'package.json'), 'utf8')) as {
    version: string
  }
  return `${name}@${manifest.version}`
}

/** Every module of lib/, as `dist/x.js` paths. */
function modules(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name)
    if (entry.isDirectory()) return modules(path)
    return entry.name.endsWith('.ts') ? [`dist/${relative(lib, path).slice(0, -3)}.js`] : []
  })
}

/** The repository's TypeScript, as a user's project would have its own, run in `cwd`; `args` as for `tsc`. */
function tsc(args: string[], cwd: string) {
  return finished(process.execPath, [join(repository, 'node_modules/typescript/bin/tsc'), ...args], cwd, 120_000)
}

/** A command of the docs started in the folder: its output kept, killed with its children when the test ends. */
function started(t: Test, child: ChildProcess, group: boolean) {
  let output = ''
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()))
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve))
  t.teardown(() => {
    if (child.exitCode !== null || child.signalCode !== null) return
    // A shell line's npx and the gateway under it share its process group.
    if (group) process.kill(-(child.pid as number), 'SIGKILL')
    else child.kill('SIGKILL')
  })
  return {
    exited,
    output: () => output,
    /** Resolves once `ready` does (a `false` from `until` is a timeout); rejects if the command exits first. */
    async until(ready: Promise<unknown>): Promise<void> {
      const outcome = await Promise.race([
        ready,
        exited.then((code) => Promise.reject(new Error(`exited with ${code} before it was ready:\n${output}`))),
      ])
      if (outcome === false) throw new Error(`never ready:\n${output}`)
    },
  }
}

/** A shell snippet of the docs, run by bash in `cwd`, in a process group of its own. */
function shell(t: Test, script: string, cwd: string) {
  const child = spawn('bash', ['-euo', 'pipefail', '-c', script], {
    cwd,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  return started(t, child, true)
}

t.comment(`node ${process.version}: tap, npm and the packed gateway run on it (.ci/run runs this file on Node 24 too)`)
t.ok(existsSync(join(repository, 'dist/cli.js')), 'dist/ is built (npm ci or npm run build)')
// The installs write about 10,000 files: on a tmpfs, where the machine has one, they cost half the CPU they cost on disk.
const root = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'payments-gate-package-'))
t.teardown(() => rmSync(root, { recursive: true, force: true }))
const [packed] = JSON.parse(npm(['pack', '--json', '--ignore-scripts', '--pack-destination', root], repository)) as {
  filename: string
  files: { path: string }[]
}[]
const files = packed?.files.map((file) => file.path) ?? []
const tarball = join(root, packed?.filename ?? '')

/** `npm install ARGS` in `folder`, run while the tests before its use do; rejects with npm's output if it fails. */
function install(folder: string, args: string[]) {
  const command = ['install', '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund', ...args]
  return finished('npm', command, folder, 100_000).then((run) => {
    if (run.status !== 0) throw new Error(`npm install in ${folder}: ${run.status}\n${run.stderr}`)
  })
}

/** An empty ES module project (docs/middleware.md) in a folder of its own. */
function emptyProject(name: string) {
  const folder = join(root, name)
  mkdirSync(folder)
  writeFileSync(join(folder, 'package.json'), JSON.stringify({ name, private: true, type: 'module' }))
  return folder
}

/** The package alone, as `npm install --omit=dev` in an empty folder leaves it, with @types/node as a TypeScript user's has it. */
const alone = {
  folder: emptyProject('alone'),
  installed: install(join(root, 'alone'), [tarball, locked('@types/node')]),
}
/**
 * The package beside Express, Fastify and Hono, as a user adds them to the project above (a copy of it, taken before
 * its tests write there): the README's lines and the examples run here. npm checks the package's peer ranges then.
 */
const frameworks = { folder: join(root, 'frameworks'), installed: Promise.resolve() }
frameworks.installed = alone.installed.then(async () => {
  mkdirSync(frameworks.folder)
  const names = ['package.json', 'package-lock.json', 'node_modules']
  const copy = await finished('cp', ['-a', ...names, frameworks.folder], alone.folder, 100_000)
  if (copy.status !== 0) throw new Error(`cp -a: ${copy.status}\n${copy.stderr}`)
  await install(frameworks.folder, ['express', '@types/express', 'fastify', 'hono', '@hono/node-server'].map(locked))
})
// Awaited by the tests that use them; until then, a failure must not end the process as an unhandled rejection.
for (const project of [alone, frameworks]) project.installed.catch(() => undefined)

const readme = snippetsOf('README.md')
const middleware = new Map([...snippetsOf('docs/middleware.md'), ...snippetsOf('docs/middleware-reference.md')])
const policies = snippetsOf('docs/policies.md')
const snippet = (docs: Map<string, Snippet>, name: string): Snippet => {
  const found = docs.get(name)
  if (found === undefined) throw new Error(`no snippet marked test: ${name}`)
  return found
}
/** The password the README's sidecar lines give the user `shop-1`, in place of a random one. */
const PASSWORD = 'a-readme-password-of-32-characters'
const shop = { authorization: basic('shop-1', PASSWORD) }

/**
 * A user's compiler options, without skipLibCheck: every declaration file of the package and of its dependencies is
 * checked. TypeScript's own lib files, the same in every project, are not checked again (skipDefaultLibCheck).
 */
const USER_OPTIONS = { strict: true, module: 'nodenext', target: 'es2022', skipDefaultLibCheck: true }

/** What compiles the declarations in the project without any framework, written once it is installed (compiled below). */
const aloneWritten = alone.installed.then(() => {
  mkdirSync(join(alone.folder, 'none'))
  writeFileSync(
    join(alone.folder, 'none/app.ts'),
    [
      "import { createGate, createGateway, createLogger, type ExpressMiddleware, type FastifyGatePlugin, type HonoGateMiddleware } from 'payments-gate'",
      "const gate = await createGate({ credentials: './credentials.json' })",
      'export const middleware: [ExpressMiddleware, FastifyGatePlugin, HonoGateMiddleware] = [gate.express(), gate.fastify, gate.hono()]',
      "export const gateway = createGateway({ checks: gate.checks, target: 'http://127.0.0.1:9', logger: createLogger() })",
      '// The Express request is typed by the import alone, Express or not.',
      'export const entity = ({} as Express.Request).paymentsGate?.entity',
    ].join('\n'),
  )
  writeFileSync(
    join(alone.folder, 'tsconfig.none.json'),
    JSON.stringify({
      compilerOptions: { ...USER_OPTIONS, noEmit: true },
      include: ['none'],
    }),
  )
})

t.test(
  'npm pack holds the compiled modules, their declarations and the sample policies, and nothing else',
  async (t) => {
    for (const file of files) t.match(file, /^(dist\/.+\.(js|d\.ts)|policies\/[^/]+\.json|README\.md|package\.json)$/)
    for (const module of modules(lib)) {
      t.ok(files.includes(module), module)
      t.ok(files.includes(module.replace(/\.js$/, '.d.ts')), `${module}'s declarations`)
    }
    t.ok(files.includes('policies/default.json'))
    // The maps are not packed, so no module may name one (tsconfig.build.json emits none). The line found, if any, is
    // what is compared: t.notMatch would diff the whole module, even when it passes.
    for (const file of files.filter((name) => name.endsWith('.js')))
      t.equal(
        /^\/\/# sourceMappingURL=.*$/m.exec(readFileSync(join(repository, file), 'utf8'))?.[0],
        undefined,
        `${file} names no map`,
      )
  },
)

t.test(
  'installed with --omit=dev in an empty folder, it serves a payment and a refusal, and imports as a library',
  async (t) => {
    await alone.installed
    const folder = alone.folder
    t.ok(existsSync(join(folder, 'node_modules/payments-gate/dist/cli.js')))
    t.notOk(existsSync(join(folder, 'node_modules/typescript')), 'no dev dependency')
    t.notOk(existsSync(join(folder, 'node_modules/tap')), 'no dev dependency')

    const library = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "const m = await import('payments-gate'); console.log(typeof m.createGate, typeof m.createGateway)",
      ],
      {
        cwd: folder,
        env,
        encoding: 'utf8',
      },
    )
    t.equal(library.stdout.trim(), 'function function', library.stderr)

    const backend = await startBackend()
    t.teardown(() => backend.close())
    const credentials = await writeCredentials(folder)
    const [listen, admin] = [await freePort(), await freePort()]
    const args = [
      'serve',
      '--listen',
      `127.0.0.1:${listen}`,
      '--admin',
      `127.0.0.1:${admin}`,
      '--target',
      backend.url,
      '--credentials',
      credentials,
      '--shutdown-delay',
      '0',
    ]
    // The bin npm linked, run as a user runs it; the policies are the package's own sample.
    const gateway = spawn(
      join(folder, 'node_modules/.bin/payments-gate'),
      [...args, '--policies', 'node_modules/payments-gate/policies'],
      {
        cwd: folder,
        env,
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    )
    let stderr = ''
    gateway.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const exited = new Promise<number | null>((resolve) => gateway.on('exit', resolve))
    t.teardown(() => void gateway.kill('SIGKILL'))
    await Promise.race([
      poll(`http://127.0.0.1:${admin}/readyz`, 200),
      exited.then(() => Promise.reject(new Error(`exited: ${stderr}`))),
    ])

    const payment = await send(listen, {
      headers: paymentHeaders(),
      body: saleBody({ transactionReference: 'packed-1' }),
    })
    t.equal(payment.status, 201)
    const refusal = await send(listen, {
      headers: paymentHeaders({ authorization: 'Basic bm9ib2R5Ong=' }),
      body: saleBody(),
    })
    t.equal(refusal.status, 401)
    t.match(refusal.json, { errorName: String })
    t.equal(backend.received.length, 1, 'the refusal never reached the backend')
    gateway.kill('SIGTERM')
    t.equal(await exited, 0, stderr)

    // `serve` with no ./policies says where the samples are (no such folder here yet).
    const missing = spawnSync(
      join(folder, 'node_modules/.bin/payments-gate'),
      ['serve', '--target', backend.url, '--credentials', credentials],
      { cwd: folder, env, encoding: 'utf8' },
    )
    t.equal(missing.status, 2)
    t.equal(
      missing.stderr,
      `payments-gate serve: --policies: ./policies: no such file or folder; give a readable folder of policy files (docs/policies.md), such as a copy of the samples in ${join(folder, 'node_modules/payments-gate/policies')}\n`,
    )
  },
)

t.test('README: npx payments-gate demo in an empty project, on the policies the package ships', async (t) => {
  await frameworks.installed
  t.notOk(existsSync(join(frameworks.folder, 'policies')), 'no ./policies')
  const port = await freePort()
  const demo = shell(
    t,
    substituted(snippet(readme, 'readme-demo'), [
      // Installed above, from the tarball.
      ['npm install payments-gate', ': npm install payments-gate'],
      ['npx payments-gate demo', `npx payments-gate demo --listen 127.0.0.1:${port}`],
    ]),
    frameworks.folder,
  )
  await demo.until(until(() => demo.output().includes('Ctrl-C stops the demo.'), 60_000))
  const curls = demo
    .output()
    .split('\n')
    .filter((line) => line.startsWith('  curl '))
  t.equal(curls.length, 3, 'a sale, a recurring authorization, a refused sale')
  if (spawnSync('curl', ['--version']).error !== undefined) {
    t.skip('!!! no curl on this machine to paste the lines into', () => {})
    return
  }
  const statuses = curls.map(
    (line) => /^HTTP\/1\.1 (\d+)/.exec(spawnSync('bash', ['-c', line], { encoding: 'utf8' }).stdout)?.[1],
  )
  t.same(statuses, ['201', '201', '400'], 'the lines pasted as printed')
})

t.test("README: the sidecar's lines, then the example body of a recurring authorization", async (t) => {
  const backend = await startBackend()
  t.teardown(() => backend.close())
  const [listen, admin] = [await freePort(), await freePort()]
  const sidecar = shell(
    t,
    substituted(snippet(readme, 'readme-sidecar'), [
      ['PASSWORD=$(openssl rand -base64 24)', `PASSWORD='${PASSWORD}'`],
      ['--target http://127.0.0.1:9000', `--target ${backend.url}`],
      ['--listen 8080', `--listen 127.0.0.1:${listen}`],
      ['--admin 127.0.0.1:9901', `--admin 127.0.0.1:${admin}`],
    ]),
    frameworks.folder,
  )
  await sidecar.until(poll(`http://127.0.0.1:${admin}/readyz`, 200))
  const body = JSON.parse(snippet(readme, 'readme-recurring').code) as Record<string, any>
  const recurring = await send(listen, {
    path: '/payments/authorizations/migrateRecurring',
    headers: paymentHeaders(shop),
    body,
  })
  t.equal(recurring.status, 201, recurring.text)
  t.equal(JSON.parse(backend.received[0]?.body.toString() ?? '{}').instruction.intent, 'subscription')
  const other = await send(listen, {
    path: '/payments/authorizations/migrateRecurring',
    headers: paymentHeaders(shop),
    body: { ...body, instruction: { ...body.instruction, intent: 'monthly' } },
  })
  t.equal(other.status, 400, 'an intent the schema does not take')
})

/** The TypeScript examples, each with what the test changes to run it here (ports, the backend, Redis) and adds after it. */
interface Example {
  readonly snippet: Snippet
  readonly replacements?: readonly (readonly [string, string])[]
  readonly after?: string
}

/** The examples that start a server. */
const SERVING = [
  'readme-express',
  'middleware-express',
  'middleware-fastify',
  'middleware-hono',
  'middleware-node',
  'middleware-gateway',
]
// What the examples talk to, and the port each listens on: known before they are compiled.
const exampleBackend = await startBackend()
t.teardown(() => exampleBackend.close())
const redis = await startRedis(t)
const ports: Record<string, number> = {}
for (const name of SERVING) ports[name] = await freePort()
/** The example's port 3000 made its own free one. */
const onPort = (name: string, text: string) => [text, text.replace('3000', String(ports[name]))] as const
const examples: Record<string, Example> = {
  'readme-express': {
    snippet: snippet(readme, 'readme-express'),
    replacements: [onPort('readme-express', 'app.listen(3000)')],
  },
  'middleware-options': { snippet: snippet(middleware, 'middleware-options'), after: 'await gate.close()' },
  'middleware-gateway': {
    snippet: snippet(middleware, 'middleware-gateway'),
    replacements: [
      ["'redis://redis:6379/0'", `'${redis?.url ?? 'redis://127.0.0.1:9/0'}'`],
      ["'http://127.0.0.1:9000'", `'${exampleBackend.url}'`],
      ["gateway.listen(8080, '0.0.0.0')", `gateway.listen(${ports['middleware-gateway']}, '127.0.0.1')`],
    ],
  },
  'middleware-node': {
    snippet: snippet(middleware, 'middleware-node'),
    replacements: [onPort('middleware-node', '.listen(3000)')],
  },
  'middleware-express': {
    snippet: snippet(middleware, 'middleware-express'),
    replacements: [onPort('middleware-express', 'app.listen(3000)')],
  },
  'middleware-fastify': {
    snippet: snippet(middleware, 'middleware-fastify'),
    replacements: [onPort('middleware-fastify', 'app.listen({ port: 3000 })')],
  },
  'middleware-hono': {
    snippet: snippet(middleware, 'middleware-hono'),
    replacements: [onPort('middleware-hono', 'port: 3000')],
  },
  'policies-code': { snippet: snippet(policies, 'policies-code'), after: 'await gate.close()' },
}

/** Every example, written beside the frameworks once they are installed, to be compiled together. */
const examplesWritten = frameworks.installed.then(() => {
  const folder = frameworks.folder
  mkdirSync(join(folder, 'examples'))
  for (const [name, example] of Object.entries(examples)) {
    const code = substituted(example.snippet, example.replacements ?? [])
    writeFileSync(join(folder, 'examples', `${name}.ts`), `${code}\n${example.after ?? ''}\n`)
  }
  // Beside them, what an application that types the middleware with each framework's own types writes.
  writeFileSync(
    join(folder, 'examples/frameworks.ts'),
    [
      "import type { ErrorRequestHandler, RequestHandler } from 'express'",
      "import type { FastifyPluginCallback } from 'fastify'",
      "import type { MiddlewareHandler } from 'hono'",
      "import type { Gate } from 'payments-gate'",
      "import type { FastifyGateOptions } from 'payments-gate/fastify'",
      'declare const gate: Gate',
      'export const express: RequestHandler = gate.express()',
      'export const errors: ErrorRequestHandler = gate.expressErrorHandler()',
      'export const fastify: FastifyPluginCallback<FastifyGateOptions> = gate.fastify',
      'export const hono: MiddlewareHandler = gate.hono()',
    ].join('\n'),
  )
  writeFileSync(
    join(folder, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { ...USER_OPTIONS, outDir: 'out' },
      include: ['examples'],
    }),
  )
})
/**
 * Both projects compiled by one tsc: `tsc -b` builds each with a program of its own, the project without frameworks
 * seeing none of them, in one process, where a tsc each paid its start and its parse of TypeScript's lib again.
 */
const compiled = Promise.all([aloneWritten, examplesWritten]).then(() =>
  tsc(['-b', '--pretty', 'false', 'alone/tsconfig.none.json', 'frameworks/tsconfig.json'], root),
)
compiled.catch(() => undefined)

t.test(
  'the declarations compile in a project without Express, Fastify or Hono, and without skipLibCheck',
  async (t) => {
    const build = await compiled
    for (const framework of ['express', '@types/express', 'fastify', 'hono'])
      t.notOk(existsSync(join(alone.folder, 'node_modules', framework)), `no ${framework} installed`)
    // One tsc compiled both projects: its output names the project of each error (alone/..., frameworks/...).
    t.equal(build.status, 0, build.stdout)
  },
)

t.test(
  "the docs' TypeScript examples, compiled together beside Express, Fastify and Hono, run with one request each",
  async (t) => {
    t.same(
      [
        ...middleware.keys(),
        ...policies.keys(),
        ...[...readme.values()].filter((s) => s.info === 'ts').map((s) => s.name),
      ].sort(),
      Object.keys(examples).sort(),
      'every TypeScript example the docs mark is compiled and run here',
    )
    const build = await compiled
    t.equal(build.status, 0, build.stdout)
    const folder = frameworks.folder
    // What middleware-gateway reads beside the README's ./policies and credentials.json.
    writeFileSync(join(folder, 'fingerprint-key'), `${'k'.repeat(64)}\n`)
    writeFileSync(
      join(folder, 'backend-errors.json'),
      JSON.stringify({
        rules: [{ status: 400, match: { '$.code': 'E_CURRENCY' }, errorName: 'currencyIsNotSupported' }],
      }),
    )

    /** A compiled example, started in the folder (where the README's sidecar lines left ./policies and credentials.json). */
    function start(t: Test, name: string) {
      const child = spawn(process.execPath, [join('out', `${name}.js`)], {
        cwd: folder,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      return { child, example: started(t, child, false) }
    }
    /** An example that starts a server: `request` once it listens on its port. */
    async function run(t: Test, name: string, request: () => Promise<Reply>): Promise<Reply> {
      const { child, example } = start(t, name)
      await example.until(until(() => accepts(ports[name] as number), 60_000))
      const reply = await request()
      child.kill('SIGKILL')
      await example.exited
      return reply
    }
    const sale = (name: string, reference: string) => () =>
      send(ports[name] as number, {
        headers: paymentHeaders(shop),
        body: saleBody({ transactionReference: reference }),
      })

    // Side by side: each example is a process of its own, on its own port.
    t.jobs = Object.keys(examples).length
    for (const name of ['middleware-options', 'policies-code'])
      t.test(name, async (t) => {
        const { example } = start(t, name)
        t.equal(await example.exited, 0, example.output())
      })
    for (const name of ['readme-express', 'middleware-express', 'middleware-fastify', 'middleware-hono'])
      t.test(name, async (t) => {
        const reply = await run(t, name, sale(name, name))
        t.equal(reply.status, 201, reply.text)
        t.match(reply.json, { accepted: name, entity: 'default', by: 'shop-1' })
      })
    t.test('middleware-node', async (t) => {
      const reply = await run(t, 'middleware-node', sale('middleware-node', 'node'))
      t.equal(reply.status, 201, reply.text)
      t.same(reply.json, { ok: true })
    })
    t.test('middleware-gateway', { skip: redis === undefined && 'no redis-server' }, async (t) => {
      const reply = await run(t, 'middleware-gateway', sale('middleware-gateway', 'gateway'))
      t.equal(reply.status, 201, reply.text)
      t.equal(
        JSON.parse(exampleBackend.received.at(-1)?.body.toString() ?? '{}').transactionReference,
        'gateway',
        'forwarded',
      )
    })
  },
)
