import t from 'tap'
import { buildRouter, canonicalPath, normalizeBasePath } from '../../lib/checks/route.js'

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
  t.equal(route('POST', '/api/payments/sales'), undefined)
  t.equal(route('POST', '/api/payments/sales/migrateCardOnFileX'), undefined)
  t.equal(route('POST', '/api/payments/sales/migrateCardOnFile/x'), undefined)
  t.equal(route('POST', '/api/payments/sales/migrateCardOnFile/..'), undefined)
  t.equal(route('POST', undefined), undefined)
  t.equal(route('POST', '/api/payments/sales/migrateCardOnFile'), 'sale')
})

t.test('other spellings of an operation path are that operation: a lenient backend router would take them as one', async (t) => {
  const route = buildRouter('/api')
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
  t.match(route('GET', '/api/payments/sales/migrateCardOnFile/'), { status: 405 }, 'another method there is a 405 as well')
  t.equal(route('POST', '/api/payments/sales/migrate%ZZCardOnFile'), undefined, 'a malformed escape compares as sent')
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
})
