import t from 'tap'
import { buildOpenApi } from '../../lib/openapi.js'
import { main } from '../../lib/cli/main.js'
import { PassThrough } from 'node:stream'
import { runCli } from '../helpers/cli.js'

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

t.test('a file argument is a usage error', async (t) => {
  const { code, stderr } = await runCli(['openapi', 'spec.json'])
  t.equal(code, 2)
  t.match(stderr, /takes no file/)
})
