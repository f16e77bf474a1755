import { spawn } from 'node:child_process'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import t from 'tap'
import ts from 'typescript'
import { AUTH, policyJson, saleBody, writeCredentials } from './helpers/fixtures.js'
import { paymentHeaders, send, until } from './helpers/http.js'
import { freePort } from './helpers/servers.js'

/**
 * docs/middleware-reference.md's report-mode example for node:http, taken from the page as it is, type-checked against the
 * package's types and run against the real gate: what a reader copies must compile and do what the page says.
 */
const repository = new URL('..', import.meta.url)
const page = await readFile(new URL('docs/middleware-reference.md', repository), 'utf8')
const section = page.slice(page.indexOf('\n## Report mode\n'))
const example = /\n```js\n([^]*?)\n```\n/.exec(section)?.[1] ?? ''
const index = pathToFileURL(join(repository.pathname, 'lib/index.js')).href

t.test(
  'the example is where the page puts it: a whole program on node:http with the gate in report mode',
  async (t) => {
    t.match(example, /from 'payments-gate'/)
    t.match(example, /gate\.handler\(/)
    t.match(example, /mode: 'report'/)
    t.match(example, /\.listen\(8080\)/)
  },
)

t.test('it type-checks, as JavaScript checked against the types the package ships', async (t) => {
  const dir = t.testdir({ 'example.mjs': example })
  // The repository's own compiler options (tsconfig.json), JavaScript checked, 'payments-gate' read from lib/.
  const root = repository.pathname
  const { config } = ts.readConfigFile(join(root, 'tsconfig.json'), ts.sys.readFile)
  const { options } = ts.parseJsonConfigFileContent(config, ts.sys, root)
  Object.assign(options, {
    allowJs: true,
    checkJs: true,
    noEmit: true,
    paths: { 'payments-gate': [join(root, 'lib/index.ts')] },
  })
  const program = ts.createProgram([join(dir, 'example.mjs')], options)
  // The example's own problems and the program's global ones: lib/ itself is type-checked by npm run typecheck.
  const problems = ts
    .getPreEmitDiagnostics(program, program.getSourceFile(join(dir, 'example.mjs')))
    .map((diagnostic) => ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'))
  t.same(problems, [])
})

t.test("it runs: enforce's refusals are logged with their request id, every payment reaches the handler", async (t) => {
  const dir = t.testdir()
  await mkdir(join(dir, 'policies'))
  await writeFile(join(dir, 'policies', 'default.json'), policyJson('default'))
  await writeCredentials(dir)
  const port = await freePort()
  const program = example.replace(`'payments-gate'`, `'${index}'`).replace('.listen(8080)', `.listen(${port})`)
  await writeFile(join(dir, 'example.mjs'), program)
  const child = spawn(
    process.execPath,
    [`--import=${new URL('typescript.mjs', import.meta.url).href}`, join(dir, 'example.mjs')],
    { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'] },
  )
  t.teardown(() => void child.kill('SIGKILL'))
  let stdout = ''
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  const url = `http://127.0.0.1:${port}`
  t.ok(
    await until(
      () =>
        fetch(`${url}/status`).then(
          (res) => res.ok,
          () => false,
        ),
      20_000,
    ),
    'the example listens',
  )
  t.equal(await (await fetch(`${url}/status`)).text(), 'hello', 'another path')
  t.equal((await send(url, { headers: paymentHeaders(), body: saleBody() })).status, 201, 'a clean payment')
  const refused = saleBody({ transactionReference: 'order-1234/usd' })
  refused.instruction.value.currency = 'USD'
  const reply = await send(url, { headers: paymentHeaders({ 'x-request-id': 'req-usd' }), body: refused })
  t.equal(reply.status, 201, 'a payment enforce would refuse still reaches the handler')
  t.ok(await until(() => stdout.includes('enforce would refuse')), 'logged')
  const lines = stdout.split('\n').filter((line) => line.includes('enforce would refuse'))
  t.equal(lines.length, 1, 'the clean payment is not')
  t.match(JSON.parse(lines[0] ?? '{}'), {
    requestId: 'req-usd',
    entity: 'default',
    wouldRefuse: 'currencyIsNotSupported',
  })
  t.equal(
    (await send(url, { headers: { ...paymentHeaders(), authorization: `${AUTH}x` }, body: saleBody() })).status,
    401,
  )
})
