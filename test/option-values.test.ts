import t from 'tap'
import {
  BODY_LIMIT_MIN,
  BOUNDS,
  checkBounded,
  checkGateOptions,
  SMALLEST_PAYMENT,
  TIMER_MAX_MS,
  TIMEOUT_MAX_MS,
  wholeNumberIn,
} from '../lib/option-values.js'
import { IDEMPOTENCY_DEFAULTS } from '../lib/defaults.js'
import { compileSchema } from '../lib/schema/compile.js'
import { SaleRequest } from '../lib/schema/bodies.js'

t.test('the smallest body limit holds the smallest payment the schema takes', async (t) => {
  t.ok(compileSchema(SaleRequest).check(SMALLEST_PAYMENT), 'a valid sale')
  t.equal(BODY_LIMIT_MIN, JSON.stringify(SMALLEST_PAYMENT).length)
})

t.test('every timer made of the longest --timeout fits what node holds', async (t) => {
  t.ok(3 * TIMEOUT_MAX_MS + IDEMPOTENCY_DEFAULTS.inFlightMarginMs <= TIMER_MAX_MS, 'the in-flight window')
  t.ok((Math.ceil(TIMEOUT_MAX_MS / 1000) + 1) * 1000 <= TIMER_MAX_MS, 'the drain')
  t.ok(BOUNDS.shutdownDelay.max * 1000 <= TIMER_MAX_MS && BOUNDS.drainTimeout.max * 1000 <= TIMER_MAX_MS, 'seconds')
  t.ok(Number.isSafeInteger(BOUNDS.idempotencyTtl.max * 1000), 'the TTL in ms')
})

t.test('digits only, inside the bound; anything else refused, never read as Infinity', async (t) => {
  const read = wholeNumberIn({ unit: 'things', min: 2, max: 10 })
  t.equal(read('2'), 2)
  t.equal(read('10'), 10)
  for (const text of ['1', '11', '-3', '3.0', '1e1', ' 3', '', '9'.repeat(320)])
    t.throws(() => read(text), { code: 'EINVALID', message: 'must be a whole number of things from 2 to 10' }, text)
})

t.test("createGate's numeric options are checked with the flags' bounds", async (t) => {
  t.doesNotThrow(() => checkBounded('bodyLimit', undefined))
  t.doesNotThrow(() => checkBounded('bodyLimit', BODY_LIMIT_MIN))
  for (const value of [0, BODY_LIMIT_MIN - 1, 1.5, Number.POSITIVE_INFINITY, '65536'])
    t.throws(() => checkBounded('bodyLimit', value), {
      code: 'EINVALID',
      message: `bodyLimit=${String(value)} must be a whole number of bytes from ${BODY_LIMIT_MIN}, below 2^53`,
    })
})

t.test("createGate's vendor, basePath and mode are checked by the flags' own parsers", async (t) => {
  t.doesNotThrow(() => checkGateOptions({}))
  t.doesNotThrow(() => checkGateOptions({ bodyLimit: 65536, vendor: 'acme', basePath: '/v6/', mode: 'report' }))
  const refused: [Record<string, unknown>, RegExp][] = [
    [{ vendor: 'a/b' }, /^vendor="a\/b" must be a media type name/],
    [{ vendor: 5 }, /^vendor=5 must be a string$/],
    [{ basePath: '/a b' }, /^basePath="\/a b" must be a path such as \/api\/v1/],
    [{ basePath: '/a/../b' }, /^basePath="\/a\/..\/b" must be a path/],
    [{ mode: 'audit' }, /^mode="audit" must be enforce or report$/],
    [{ bodyLimit: 10 }, /^bodyLimit=10 must be a whole number of bytes from 167, below 2\^53$/],
  ]
  for (const [options, message] of refused)
    t.throws(() => checkGateOptions(options), { code: 'EINVALID', message }, JSON.stringify(options))
})
