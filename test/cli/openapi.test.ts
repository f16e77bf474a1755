import { join } from 'node:path'
import t from 'tap'
import { loadBackendErrors } from '../../lib/backend-errors/rules.js'
import { buildOpenApi } from '../../lib/openapi.js'
import { main } from '../../lib/cli/main.js'
import { PassThrough } from 'node:stream'
import { runCli } from '../helpers/cli.js'
import { BACKEND_ERROR_RULES } from '../helpers/fixtures.js'
import { parseServeOptions } from '../../lib/cli/options.js'

t.test('prints the OpenAPI document', async (t) => {
  const { code, stdout } = await runCli(['openapi'])
  t.equal(code, 0)
  t.same(JSON.parse(stdout), buildOpenApi())
})

t.test('--vendor and --base-path, or their variables', async (t) => {
  const flags = await runCli(['openapi', '--vendor', 'acme', '--base-path', '/api'])
  t.same(JSON.parse(flags.stdout), buildOpenApi({ vendor: 'acme', basePath: '/api' }))
  const stdout = new PassThrough()
  const out: Buffer[] = []
  stdout.on('data', (chunk: Buffer) => out.push(chunk))
  const env = { PAYMENTS_GATE_VENDOR: 'acme', PAYMENTS_GATE_BASE_PATH: '/api' }
  t.equal(await main(['openapi'], { stdin: new PassThrough(), stdout, stderr: new PassThrough(), env }), 0)
  t.same(JSON.parse(Buffer.concat(out).toString()), buildOpenApi({ vendor: 'acme', basePath: '/api' }))
})

t.test('--body-limit (or its variable): the size limit the document states', async (t) => {
  const flags = await runCli(['openapi', '--body-limit', '4096'])
  t.same(JSON.parse(flags.stdout), buildOpenApi({ bodyLimit: 4096 }))
  t.equal(
    JSON.parse(flags.stdout).paths['/payments/sales/migrateCardOnFile'].post.requestBody['x-max-body-bytes'],
    4096,
  )
  const stdout = new PassThrough()
  const out: Buffer[] = []
  stdout.on('data', (chunk: Buffer) => out.push(chunk))
  const env = { PAYMENTS_GATE_BODY_LIMIT: '2048' }
  t.equal(await main(['openapi'], { stdin: new PassThrough(), stdout, stderr: new PassThrough(), env }), 0)
  t.same(JSON.parse(Buffer.concat(out).toString()), buildOpenApi({ bodyLimit: 2048 }))
})

t.test('--backend-errors FILE (or its variable): the names the rules give appear under their statuses', async (t) => {
  const dir = t.testdir({
    'rules.json': JSON.stringify({
      rules: [
        ...BACKEND_ERROR_RULES,
        { status: 409, errorName: 'cardLimitIsReached', message: 'ignored: the first rule gives the message' },
        { status: 400, match: { '$.code': 'E_CURRENCY' }, errorName: 'currencyIsNotSupported' },
      ],
    }),
    'bad.json': '{"rules": 1}',
  })
  const { code, stdout } = await runCli(['openapi', '--backend-errors', join(dir, 'rules.json')])
  t.equal(code, 0)
  const document = JSON.parse(stdout)
  t.same(document, buildOpenApi({ backendErrors: await loadBackendErrors(join(dir, 'rules.json')) }))
  const { responses } = document.paths['/payments/sales/migrateCardOnFile'].post
  const names = (status: string): string[] =>
    responses[status].content['application/json'].schema.allOf[1].properties.errorName.enum
  t.same(names('402'), ['paymentIsDeclined'], 'a status the table lacks gets its row')
  t.match(responses['402'].description, /--backend-errors/)
  t.same(responses['402'].content['application/json'].examples.paymentIsDeclined.value, {
    errorName: 'paymentIsDeclined',
    message: 'The payment was declined.',
  })
  t.same(names('4XX'), ['requestIsRefused', 'cardLimitIsReached'], 'a class goes under its range')
  t.same(
    responses['409'].content['application/json'].examples.cardLimitIsReached.value.message,
    'The card limit is reached.',
  )
  t.same(
    names('400').filter((name) => name === 'currencyIsNotSupported'),
    ['currencyIsNotSupported'],
    'a table name already listed is not repeated',
  )
  const env = new PassThrough()
  const out: Buffer[] = []
  env.on('data', (chunk: Buffer) => out.push(chunk))
  t.equal(
    await main(['openapi'], {
      stdin: new PassThrough(),
      stdout: env,
      stderr: new PassThrough(),
      env: { PAYMENTS_GATE_BACKEND_ERRORS: join(dir, 'rules.json') },
    }),
    0,
  )
  t.same(JSON.parse(Buffer.concat(out).toString()), document)
  const bad = await runCli(['openapi', '--backend-errors', join(dir, 'bad.json')])
  t.equal(bad.code, 2)
  t.equal(
    bad.stderr,
    `payments-gate openapi: --backend-errors: ${join(dir, 'bad.json')}: $: must be an object whose only key is "rules", an array of rules; fix it (payments-gate check-backend-errors FILE lists every problem)\n`,
  )
})

t.test('a file argument is a usage error', async (t) => {
  const { code, stderr } = await runCli(['openapi', 'spec.json'])
  t.equal(code, 2)
  t.match(stderr, /^payments-gate openapi: too many arguments; usage: payments-gate openapi \[flags\]\n$/)
})

t.test('--vendor and --base-path are refused as serve refuses them, from a flag or a variable', async (t) => {
  const cases: [string[], Record<string, string>, string][] = [
    [['--vendor', 'a b/c'], {}, '--vendor="a b/c" must be a media type name'],
    [[], { PAYMENTS_GATE_VENDOR: 'a b/c' }, 'PAYMENTS_GATE_VENDOR="a b/c" must be a media type name'],
    [['--base-path', '/api?x=1'], {}, '--base-path="/api?***" must be a path'],
    [[], { PAYMENTS_GATE_BASE_PATH: '/my api' }, 'PAYMENTS_GATE_BASE_PATH="/my api" must be a path'],
  ]
  for (const [args, env, message] of cases) {
    const stdout = new PassThrough()
    const stderr = new PassThrough()
    const err: Buffer[] = []
    stderr.on('data', (chunk: Buffer) => err.push(chunk))
    t.equal(await main(['openapi', ...args], { stdin: new PassThrough(), stdout, stderr, env }), 2)
    t.ok(Buffer.concat(err).toString().startsWith(`payments-gate openapi: ${message}`), message)
    const serve = parse(['--target', 'http://b', '--credentials', 'c', ...args], env)
    t.ok(serve.startsWith(message), `serve: ${message}`)
  }
})

function parse(args: string[], env: Record<string, string>): string {
  try {
    parseServeOptions(args, env)
    return ''
  } catch (error) {
    return (error as Error).message
  }
}
