import t from 'tap'
import { buildChecks } from '../../lib/checks/index.js'
import { reject } from '../../lib/errors.js'
import { eitherOperation, routeReader } from '../../lib/surfaces/shared.js'
import { staticPolicies } from '../../lib/policy/policy.js'

t.test('eitherOperation: any reading that names an operation decides; two that name two are refused', async (t) => {
  const refused = reject('requestIsMalformed')
  t.equal(eitherOperation('sale', undefined), 'sale')
  t.equal(eitherOperation(undefined, 'sale'), 'sale', 'the route alone names it')
  t.equal(eitherOperation('sale', 'sale'), 'sale')
  t.equal(eitherOperation(undefined, undefined), undefined)
  t.equal(eitherOperation(refused, 'sale'), refused, 'a refused target stays refused')
  t.equal(eitherOperation('sale', refused), refused)
  t.match(eitherOperation('sale', 'recurring'), { status: 400, body: { errorName: 'requestIsMalformed' } })
})

t.test("routeReader: a route's declared path, read once, after any mount point or parameter", async (t) => {
  const checks = buildChecks({ policies: staticPolicies([]) })
  let reads = 0
  const read = routeReader({ ...checks, targetOf: (url, mounted) => (reads++, checks.targetOf(url, mounted)) })
  t.equal(read('/:tenant/payments/sales/migrateCardOnFile'), 'sale')
  t.equal(read('/:tenant/payments/sales/migrateCardOnFile'), 'sale')
  t.equal(reads, 1, 'once per route')
  t.equal(read('/v6/payments/authorizations/migrateRecurring'), 'recurring')
  t.equal(read('/payments/*'), undefined)
  t.equal(read('*'), undefined, 'a pattern that is no target names nothing')
  t.equal(read('/payments/sales/:operation'), undefined, 'the request path decides a parameter')
})
