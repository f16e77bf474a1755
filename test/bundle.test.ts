// The command as the package ships it: dist/cli.js, bundled by scripts/bundle-cli.js (npm run build).
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { runCli } from './helpers/cli.js'
import { uncovered } from './helpers/uncovered.js'

const repository = fileURLToPath(new URL('..', import.meta.url))
/** The bundle runs outside the coverage of lib/ (package.json's coverage-exclude leaves dist/ out): none is measured. */
const env = { ...process.env, _TAPJS_PROCESSINFO_COVERAGE_: '0' }
const bundle = readFileSync(new URL('../dist/cli.js', import.meta.url), 'utf8')

t.test('one file: the error serializer written at build time, no Ajv, no module of the build beside it', async (t) => {
  t.match(bundle, /^\/\/ error-serializer:error-body$/m, "fast-json-stringify's standalone code")
  t.notMatch(bundle, /^\/\/ node_modules\/ajv\//m, 'which needs no Ajv')
  t.notMatch(bundle, /^import .* from "\.\.?\//m, 'every module of the build inside')
})

t.test('the bundled command answers the error bodies the library answers, byte for byte', async (t) => {
  const bodies = [
    '{"transactionReference":"a"}',
    // Keys written into a jsonPath: a quote, a backslash, U+2028, a surrogate pair, a control character, a long s.
    '{"x\\"y\\\\z\\u2028\\ud83d\\ude00\\u0001":{"__proto__":{}}}',
    '{"transactionReference":"a","tran\u017factionReference":"b"}',
    '{"transactionReference":7}',
    '{not json',
    '',
  ]
  for (const body of bodies) {
    const args = ['validate', '--operation', 'sale', '--policies', 'policies', '-']
    const shipped = spawnSync(...uncovered(['dist/cli.js', ...args], env), {
      cwd: repository,
      env,
      input: body,
      encoding: 'utf8',
    })
    const library = await runCli(args, body)
    t.equal(shipped.status, library.code, body)
    t.equal(shipped.stdout, library.stdout, body)
    t.match(shipped.stdout, /^\{"errorName":"/, 'an error body')
  }
  const odd = spawnSync(...uncovered(['dist/cli.js', 'validate', '--operation', 'sale', '-'], env), {
    cwd: repository,
    env,
    input: bodies[1],
    encoding: 'utf8',
  })
  // The odd key reached the body: the comparison above covered its escapes.
  t.match(JSON.parse(odd.stdout), { validationErrors: [{ jsonPath: /^\$\['x"y/ }] })
  t.match(odd.stdout, '\\u0001', 'the control character escaped')
})
