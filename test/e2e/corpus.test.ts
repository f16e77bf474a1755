import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { keepAliveSender, paymentHeaders } from '../helpers/http.js'
import { watchCrashes } from '../helpers/logs.js'
import { isErrorBody } from '../helpers/oracle.js'
import { startGateway } from '../helpers/surfaces.js'

/**
 * The corpus of test/corpus.test.ts (test/fixtures/json-test-suite) through
 * the real gateway: every JSONTestSuite file as the body of a well-formed sale
 * request with valid credentials. None is a valid sale, so the backend must receive nothing.
 * The body limit is 1 MiB, as in test/corpus.test.ts: at the default two
 * `n_` files are refused by size (413) before their JSON is looked at.
 * A missing folder fails this file (readdirSync throws): it never skips.
 */
const noCrashes = watchCrashes(t)
const dir = fileURLToPath(new URL('../fixtures/json-test-suite/test_parsing/', import.meta.url))
const files = readdirSync(dir)
  .filter((name) => name.endsWith('.json'))
  .sort()
const { url, backend } = await startGateway(t, { gate: { bodyLimit: 1 << 20 } })
const post = keepAliveSender(t, url)
const whiteSpaceOnly = /^[ \t\r\n]*$/

t.ok(files.length > 300, 'the corpus is there')

t.test('every corpus file: a well-formed 4xx error body, nothing forwarded', async (t) => {
  const wrong: string[] = []
  for (const name of files) {
    const body = readFileSync(join(dir, name))
    const reply = await post({ headers: paymentHeaders(), body })
    const { status, json } = reply
    const errorName: unknown = json?.errorName
    let expected = true
    if (name.startsWith('n_'))
      expected = errorName === (whiteSpaceOnly.test(body.toString('latin1')) ? 'bodyIsEmpty' : 'bodyIsNotJson')
    if (name.startsWith('y_')) expected = errorName !== 'bodyIsNotJson'
    const ok =
      status >= 400 &&
      status < 500 &&
      reply.headers['content-type'] === 'application/json' &&
      isErrorBody(json) &&
      expected
    if (!ok) wrong.push(`${name}: ${status} ${reply.text.slice(0, 100)}`)
  }
  t.same(wrong, [])
  t.equal(backend.started, 0, 'the backend received nothing')
})

noCrashes()
