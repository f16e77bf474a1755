import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { serializeError } from '../lib/errors.js'
import { buildChecks } from '../lib/checks/index.js'
import { policies } from './helpers/fixtures.js'
import { isErrorBody } from './helpers/oracle.js'

/**
 * JSONTestSuite (test/fixtures/json-test-suite, see its PROVENANCE.md), each
 * file the body of a well-formed sale request: a 4xx error body, never a pass.
 * A missing folder fails this file (readdirSync throws): it never skips.
 * Two `n_` files are larger than the default 64 KiB limit, and the size check
 * (check 5 of docs/checks.md) comes before the JSON check (check 7); the corpus therefore runs with
 * a 1 MiB limit, and the default's 413 is asserted separately.
 */
const dir = fileURLToPath(new URL('./fixtures/json-test-suite/test_parsing/', import.meta.url))
const read = (name: string) => readFileSync(join(dir, name))
const files = readdirSync(dir)
  .filter((name) => name.endsWith('.json'))
  .sort()
const checks = buildChecks({ policies: policies(), bodyLimit: 1 << 20 })
const headers = { 'content-type': 'application/vnd.example.payments-v6+json' }
const whiteSpaceOnly = /^[ \t\r\n]*$/

t.ok(files.length > 300, 'the corpus is there')

t.test('every corpus file gets a well-formed error body, never a forward or a 5xx', async (t) => {
  for (const name of files) {
    const body = read(name)
    const verdict = checks.check('sale', headers, body)
    if (verdict.ok) {
      t.fail(`${name} was accepted`)
      continue
    }
    t.ok(verdict.status >= 400 && verdict.status < 500, `${name}: ${verdict.status}`)
    t.ok(isErrorBody(JSON.parse(serializeError(verdict.body))), `${name}: error body`)
    const errorName = verdict.body.errorName
    if (name.startsWith('n_')) {
      const expected = whiteSpaceOnly.test(body.toString('latin1')) ? 'bodyIsEmpty' : 'bodyIsNotJson'
      t.equal(errorName, expected, name)
    } else if (name.startsWith('y_')) {
      t.not(errorName, 'bodyIsNotJson', name)
    }
  }
})

t.test('at the default body limit the two largest n_ files are refused by size first', async (t) => {
  const defaults = buildChecks({ policies: policies() })
  const large = files.filter((name) => read(name).length > defaults.bodyLimit)
  t.strictSame(large, ['n_structure_100000_opening_arrays.json', 'n_structure_open_array_object.json'])
  for (const name of large) t.match(defaults.check('sale', headers, read(name)), { status: 413 }, name)
})
