import t from 'tap'
import { buildRouter, canonicalPath, normalizeBasePath, parseTarget, routeFor } from '../../lib/checks/route.js'
import type { Operation } from '../../lib/schema/payment.js'

/** The operation of a target alone: undefined for a path not ours, `refused` for a target refused. */
function operationsOf(basePath: string) {
  const targetOf = buildRouter(basePath)
  return (url: string | undefined, mount?: string) => {
    const target = targetOf(url, mount)
    return target.ok ? target.operation : 'refused'
  }
}

/** The router and the method check together, as the checks route a request. */
function router(basePath: string) {
  const operationOf = operationsOf(basePath)
  return (method: string, url: string | undefined) => {
    const operation = operationOf(url)
    return operation === 'refused' ? operation : routeFor(method, operation)
  }
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
      '/\\api\\payments\\sales\\migrateCardOnFile',
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
  const operationOf = operationsOf('')
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
  t.equal(canonicalPath('/a%252Fb'), '/a/b', 'escapes decoded twice')
  t.equal(canonicalPath('/a%c5%bfb'), '/asb', 'a run of escapes is one UTF-8 character')
  t.equal(canonicalPath('/a%ff'), '/a\ufffd', 'bytes that are not UTF-8 are U+FFFD')
  t.equal(canonicalPath('/a/b%00/../c'), '/a/b', 'a NUL ends the path')
  t.equal(canonicalPath('/a/b%3F/../c'), '/a/b', 'so does an escaped ?')
  t.equal(canonicalPath('/a/b.json/c..'), '/a/b/c', 'a segment is cut at its first dot')
  t.equal(canonicalPath('/a/.../b'), '/a/b', 'nothing left of it: dropped')
})

t.test('non-ASCII spellings of an operation path are that operation', async (t) => {
  const operationOf = operationsOf('')
  for (const path of [
    '/payments/\u017fales/migrateCardOnFile',
    '/payments/sales/m\u0131grateCardOnFile',
    '/payments/sales/M\u0130GRATECARDONFILE',
    '/payments/%C5%BFales/migrateCardOnFile',
    '/payments/sales/m%C4%B1grateCardOnFile',
    '/payments/authorizations/migrateRecurring'.replace('k', '\u212a'),
    '/payments/sales/migrateCardOn%EF%AC%81le',
  ]) {
    t.not(operationOf(path), undefined, path)
  }
})

t.test('the one parse of a request target (RFC 9112 3.2)', async (t) => {
  t.same(parseTarget('/a?b'), { path: '/a?b', host: undefined })
  t.same(parseTarget('http://h/a?b'), { path: '/a?b', host: 'h' })
  t.same(parseTarget('HTTPS://h:8443'), { path: '/', host: 'h:8443' })
  t.same(parseTarget('http://h?q'), { path: '/?q', host: 'h' })
  for (const refused of ['/a#b', 'http://h/a#', 'ftp://h/a', 'http://u@h/a', 'http:///a', '*', 'a/b'])
    t.match(parseTarget(refused), { ok: false, status: 400, body: { errorName: 'requestIsMalformed' } }, refused)
})

t.test('an absolute-form target routes on its path, a fragment is refused, whatever the method', async (t) => {
  const targetOf = buildRouter('')
  t.match(targetOf('http://any-host/payments/sales/migrateCardOnFile?x'), {
    ok: true,
    operation: 'sale',
    path: '/payments/sales/migrateCardOnFile?x',
    host: 'any-host',
  })
  t.match(targetOf('/payments/sales/migrateCardOnFile'), { operation: 'sale', host: undefined })
  t.match(targetOf('/elsewhere#x'), { ok: false, status: 400 })
  t.equal(router('')('POST', '/payments/sales/migrateCardOnFile#x'), 'refused')
})

t.test('below a mount point: read with the mount taken off, in any spelling of it', async (t) => {
  const operationOf = operationsOf('')
  t.equal(operationOf('/v6/payments/sales/migrateCardOnFile', '/v6'), 'sale')
  t.equal(operationOf('/V6//payments/sales/migrateCardOnFile/', '/v6'), 'sale')
  t.equal(operationOf('/v6/payments/sales/migrateCardOnFile'), undefined, 'no mount: not ours')
  t.equal(operationOf('/v7/payments/sales/migrateCardOnFile', '/v6'), undefined, 'not below the mount')
  t.equal(operationOf('/v6/elsewhere', '/v6'), undefined)
  t.equal(operationOf('/payments/sales/migrateCardOnFile', '/v6'), 'sale', 'from the root as well')
})

t.test('base paths are normalized', async (t) => {
  t.equal(normalizeBasePath(''), '')
  t.equal(normalizeBasePath('/'), '')
  t.equal(normalizeBasePath('api/v6/'), '/api/v6')
  t.equal(normalizeBasePath('/api'), '/api')
  t.equal(normalizeBasePath('/api//'), '/api', 'every trailing slash')
})
