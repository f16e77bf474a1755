import t from 'tap'
import { buildRouter, canonicalPath, normalizeBasePath, routeFor } from '../../lib/checks/route.js'
import type { Operation } from '../../lib/schema/payment.js'

/** The router and the method check together, as the checks route a request. */
function router(basePath: string) {
  const operationOf = buildRouter(basePath)
  return (method: string, url: string | undefined) => routeFor(method, operationOf(url))
}

t.test('POST to the two paths names the operation', async (t) => {
  const route = router('')
  t.equal(route('POST', '/payments/sales/migrateCardOnFile'), 'sale')
  t.equal(route('POST', '/payments/authorizations/migrateRecurring?x=1'), 'recurring')
})

t.test('another method on those paths is 405 with Allow: POST', async (t) => {
  const refused = router('')('GET', '/payments/sales/migrateCardOnFile')
  t.match(refused, { ok: false, status: 405, body: { errorName: 'methodIsNotAllowed' }, headers: { Allow: 'POST' } })
})

t.test('any other path is not ours', async (t) => {
  const route = router('/api')
  t.equal(route('POST', '/payments/sales/migrateCardOnFile'), undefined)
  t.equal(route('POST', '/api/payments/sales'), undefined)
  t.equal(route('POST', '/api/payments/sales/migrateCardOnFileX'), undefined)
  t.equal(route('POST', '/api/payments/sales/migrateCardOnFile/x'), undefined)
  t.equal(route('POST', '/api/payments/sales/migrateCardOnFile/..'), undefined)
  t.equal(route('POST', undefined), undefined)
  t.equal(route('POST', '/api/payments/sales/migrateCardOnFile'), 'sale')
  t.equal(route('GET', '/status'), undefined, 'whatever the method: the 405 is for our paths only')
})

t.test(
  'other spellings of an operation path are that operation: a lenient backend router would take them as one',
  async (t) => {
    const route = router('/api')
    for (const path of [
      '/api/payments/sales/migrateCardOnFile/',
      '/api/payments/sales/migratecardonfile',
      '/API/Payments/Sales/MigrateCardOnFile',
      '//api//payments/sales///migrateCardOnFile',
      '/api/payments/./sales/migrateCardOnFile',
      '/api/payments/x/../sales/migrateCardOnFile',
      '/api/payments/sales/migrate%43ardOnFile',
      '/api/payments%2Fsales/migrateCardOnFile',
      '/api/payments/sales/migrateCardOnFile;jsessionid=1',
      '/api;v=1/payments/sales/migrateCardOnFile',
      '\\api\\payments\\sales\\migrateCardOnFile',
    ]) {
      t.equal(route('POST', `${path}?q=1`), 'sale', path)
    }
    t.match(
      route('GET', '/api/payments/sales/migrateCardOnFile/'),
      { status: 405 },
      'another method there is a 405 as well',
    )
    t.equal(route('POST', '/api/payments/sales/migrate%ZZCardOnFile'), undefined, 'a malformed escape compares as sent')
  },
)

t.test('the operation of a path is the same whatever the method: the proxy labels a 405 with it', async (t) => {
  const operationOf = buildRouter('')
  t.equal(operationOf('/payments/sales/migrateCardOnFile'), 'sale')
  t.equal(operationOf('/payments/sales/migrateCardOnFile/'), 'sale')
  t.equal(operationOf('/elsewhere'), undefined)
  t.equal(routeFor('DELETE', 'sale' as Operation), routeFor('GET', 'sale'), 'one 405 for every other method')
  t.equal(routeFor('POST', undefined), undefined)
})

t.test('canonicalPath', async (t) => {
  t.equal(canonicalPath('/A//b/./c/../D/'), '/a/b/d')
  t.equal(canonicalPath('/../..'), '/')
  t.equal(canonicalPath(''), '/')
  t.equal(canonicalPath('/%zz'), '/%zz')
})

t.test('base paths are normalized', async (t) => {
  t.equal(normalizeBasePath(''), '')
  t.equal(normalizeBasePath('/'), '')
  t.equal(normalizeBasePath('api/v6/'), '/api/v6')
  t.equal(normalizeBasePath('/api'), '/api')
  t.equal(normalizeBasePath('/api//'), '/api', 'every trailing slash')
})
