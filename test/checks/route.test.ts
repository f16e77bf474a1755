import t from 'tap'
import { buildRouter, normalizeBasePath } from '../../lib/checks/route.js'

t.test('POST to the two paths names the operation', async (t) => {
  const route = buildRouter('')
  t.equal(route('POST', '/payments/sales/migrateCardOnFile'), 'sale')
  t.equal(route('POST', '/payments/authorizations/migrateRecurring?x=1'), 'recurring')
})

t.test('another method on those paths is 405 with Allow: POST', async (t) => {
  const refused = buildRouter('')('GET', '/payments/sales/migrateCardOnFile')
  t.match(refused, { ok: false, status: 405, body: { errorName: 'methodIsNotAllowed' }, headers: { Allow: 'POST' } })
})

t.test('any other path is not ours', async (t) => {
  const route = buildRouter('/api')
  t.equal(route('POST', '/payments/sales/migrateCardOnFile'), undefined)
  t.equal(route('POST', '/api/payments/sales/migrateCardOnFile/'), undefined)
  t.equal(route('POST', '/api/payments/sales/migratecardonfile'), undefined, 'paths are case-sensitive')
  t.equal(route('POST', undefined), undefined)
  t.equal(route('POST', '/api/payments/sales/migrateCardOnFile'), 'sale')
})

t.test('base paths are normalized', async (t) => {
  t.equal(normalizeBasePath(''), '')
  t.equal(normalizeBasePath('/'), '')
  t.equal(normalizeBasePath('api/v6/'), '/api/v6')
  t.equal(normalizeBasePath('/api'), '/api')
})
