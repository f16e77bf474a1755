// The package as a user gets it: `npm pack`, then `npm install --omit=dev` of the tarball into an empty
// folder outside the repository (docs/deployment.md, the package). Dependencies come from the npm
// registry, through npm's cache when it holds them. It packs the dist/ that `npm ci` built (the
// `prepare` script), as test/bench.test.ts runs it: rebuilding here would race the other tests reading it.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { saleBody, writeCredentials } from './helpers/fixtures.js'
import { paymentHeaders, send } from './helpers/http.js'
import { freePort, poll, startBackend } from './helpers/servers.js'

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

/** Every module of lib/, as `dist/x.js` paths. */
function modules(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name)
    if (entry.isDirectory()) return modules(path)
    return entry.name.endsWith('.ts') ? [`dist/${relative(lib, path).slice(0, -3)}.js`] : []
  })
}

t.comment(`node ${process.version}: tap, npm and the packed gateway run on it (.ci/run runs this file on Node 24 too)`)
t.ok(existsSync(join(repository, 'dist/cli.js')), 'dist/ is built (npm ci or npm run build)')
const folder = mkdtempSync(join(tmpdir(), 'payments-gate-package-'))
t.teardown(() => rmSync(folder, { recursive: true, force: true }))
const [packed] = JSON.parse(npm(['pack', '--json', '--ignore-scripts', '--pack-destination', folder], repository)) as {
  filename: string
  files: { path: string }[]
}[]
const files = packed?.files.map((file) => file.path) ?? []

t.test(
  'npm pack holds the compiled modules, their declarations and the sample policies, and nothing else',
  async (t) => {
    for (const file of files) t.match(file, /^(dist\/.+\.(js|d\.ts)|policies\/[^/]+\.json|README\.md|package\.json)$/)
    for (const module of modules(lib)) {
      t.ok(files.includes(module), module)
      t.ok(files.includes(module.replace(/\.js$/, '.d.ts')), `${module}'s declarations`)
    }
    t.ok(files.includes('policies/default.json'))
    // The maps are not packed, so no module may name one (tsconfig.build.json emits none).
    for (const file of files.filter((name) => name.endsWith('.js')))
      t.notMatch(readFileSync(join(repository, file), 'utf8'), /^\/\/# sourceMappingURL=/m, `${file} names no map`)
  },
)

t.test(
  'installed with --omit=dev in an empty folder, it serves a payment and a refusal, and imports as a library',
  async (t) => {
    writeFileSync(join(folder, 'package.json'), JSON.stringify({ name: 'tarball-check', private: true }))
    npm(['install', '--omit=dev', '--prefer-offline', join(folder, packed?.filename ?? '')], folder)
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
  },
)
