import fc from 'fast-check'
import t from 'tap'
import {
  buildRouter,
  canonicalPath,
  forwardedPath,
  normalizeBasePath,
  parseTarget,
  routeFor,
} from '../../lib/checks/route.js'
import { runs } from '../helpers/fuzz.js'
import type { Operation } from '../../lib/schema/payment.js'

/** The operation of a target alone: undefined for a path not ours, `refused` for a target refused. */
function operationsOf(basePath: string) {
  const targetOf = buildRouter(basePath)
  return (url: string | undefined, mounted?: boolean) => {
    const target = targetOf(url, mounted)
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
  t.equal(route('POST', '/api/payments/sales/migrateCardOnFile/..'), 'refused', 'named, then a dot segment: read apart')
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
  t.same(parseTarget('http://[::1]:81/a'), { path: '/a', host: '[::1]:81' })
  t.same(parseTarget('http://a%2Db.example:/a'), { path: '/a', host: 'a%2Db.example:' })
  for (const refused of [
    '/a#b',
    'http://h/a#',
    'ftp://h/a',
    'http://u@h/a',
    'http:///a',
    '*',
    'a/b',
    // Red before: an empty host before a port, forwarded as `Host: :81`.
    'http://:81/a',
    'http://[]/a',
    'http://h:8x/a',
    'http://h:1:2/a',
    'http://h%zz/a',
    'http://h"/a',
    'http://a127.0.0.1/a',
  ])
    t.match(parseTarget(refused), { ok: false, status: 400, body: { errorName: 'requestIsMalformed' } }, refused)
})

t.test('an absolute form taken names a host every reader reads: the WHATWG URL parser finds one', async (t) => {
  const piece = fc.constantFrom(...'aZ09.-_~!$&\'()*+,;=%:[]@"<> {}|^`/?'.split(''), '%41', '%zz', '::1', '127.0.0.1')
  fc.assert(
    fc.property(fc.array(piece, { maxLength: 8 }), fc.constantFrom('http://', 'HTTPS://'), (pieces, scheme) => {
      const parsed = parseTarget(`${scheme}${pieces.join('')}/p`)
      if ('ok' in parsed || parsed.host === undefined) return true
      const url = URL.parse(`${scheme}${parsed.host}/p`)
      return url !== null && url.hostname !== ''
    }),
    runs(),
  )
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

t.test('read as a middleware reads it: an operation path under any mount point, in any spelling', async (t) => {
  const operationOf = operationsOf('')
  for (const mount of ['/v6', '/V6', '/api/', '/acme', '/:tenant', '/a/b/c', '/V6//']) {
    t.equal(operationOf(`${mount}/payments/sales/migrateCardOnFile`, true), 'sale', mount)
    t.equal(operationOf(`${mount}/Payments//sales/migrateCardOnFile/`, true), 'sale', `${mount}, respelt`)
    t.equal(operationOf(`${mount}/payments/sales/migrateCardOnFile`), undefined, `${mount}: not to the proxy`)
  }
  t.equal(operationOf('/v6/payments/authorizations/migrateRecurring', true), 'recurring')
  t.equal(operationOf('/payments/sales/migrateCardOnFile', true), 'sale', 'from the root as well')
  t.equal(operationOf('/v6/elsewhere', true), undefined)
  t.equal(
    operationOf('/v6/payments/sales/migrateCardOnFile/x', true),
    undefined,
    'the operation is the end of the path',
  )
  t.equal(
    operationOf('/v6%2Fpayments/sales/migrateCardOnFile', true),
    'sale',
    'a mount spelt with an escape: every reading',
  )
  t.equal(operationOf('/api/V6/payments/sales/migrateCardOnFile', true), 'sale')
})

t.test('base path: relative to the root for the proxy, and under any mount for a middleware', async (t) => {
  const operationOf = operationsOf('/v6')
  t.equal(operationOf('/v6/payments/sales/migrateCardOnFile'), 'sale')
  t.equal(operationOf('/V6/payments/sales/migrateCardOnFile/'), 'sale')
  t.equal(operationOf('/payments/sales/migrateCardOnFile'), undefined, '--base-path keeps its meaning')
  t.equal(operationOf('/v5/payments/sales/migrateCardOnFile'), undefined)
  t.equal(operationOf('/payments/sales/migrateCardOnFile', true), 'sale', 'a middleware fails closed')
  t.equal(operationOf('/api/v6/payments/sales/migrateCardOnFile', true), 'sale')
})

t.test('the proxy has no suffix rule: an application path that ends like an operation passes through', async (t) => {
  const targetOf = buildRouter('')
  for (const path of [
    '/v5/payments/sales/migrateCardOnFile',
    '/admin/x/payments/sales/migrateCardOnFile',
    '/admin/payments/authorizations/migrateRecurring?x=1',
    '/evil/payments/sales/migrateCardOnFile',
  ])
    t.same(targetOf(path), { ok: true, operation: undefined, path, host: undefined }, path)
})

t.test('readers that take segments off the front: checked as the operation they read', async (t) => {
  const operationOf = operationsOf('')
  for (const [path, why] of [
    ['//evil/payments/sales/migrateCardOnFile', 'new URL(target, base): an authority'],
    ['///evil/payments/sales/migrateCardOnFile', 'WHATWG skips every leading slash'],
    ['/\\evil/payments/sales/migrateCardOnFile', 'and backslash'],
    ['//evil\\x/payments/sales/migrateCardOnFile', 'RFC 3986: the authority ends at the next slash only'],
    ['/%2F%2Fevil/payments/sales/migrateCardOnFile', 'behind a hop that decodes'],
    ['/a/..//evil/payments/sales/migrateCardOnFile', 'behind a hop that resolves dot segments'],
    ['/x%00/../payments/sales/migrateCardOnFile', 'dot segments removed before a decoded NUL cuts'],
    ['/x%3F/../payments/sales/migrateCardOnFile', '... or a decoded ?'],
    ['/x%23/%2e%2e/payments/sales/migrateCardOnFile', '... or a decoded #, the dots escaped'],
    ['/x%2500/%252e%252e/payments/sales/migrateCardOnFile', 'escaped twice, behind a hop that decodes'],
    ['/x\\y/../payments/sales/migrateCardOnFile', 'a backslash kept in its segment (RFC 3986)'],
  ])
    t.equal(operationOf(path), 'sale', `${path}: ${why}`)
})

t.test('a target read as both operations, or read apart and as none, is refused', async (t) => {
  const operationOf = operationsOf('')
  t.match(
    operationOf('/payments/authorizations/migrateRecurring%00/../../../payments/sales/migrateCardOnFile'),
    'refused',
    'a router that cuts at the NUL reads the recurring authorization, new URL the sale',
  )
  t.equal(operationOf('/x/../y/payments/sales/migrateCardOnFile'), 'refused', 'no reading takes it for the sale')
  t.equal(operationOf('//evil/v5/payments/sales/migrateCardOnFile'), 'refused')
  t.equal(operationOf('/x/../y/elsewhere'), undefined, 'naming no operation: not ours')
  t.equal(operationOf('//cdn/assets/app.js'), undefined)
  t.equal(operationOf('/v5/payments/sales/migrateCardOnFile%20notes'), undefined, 'the name not whole')
  t.equal(operationOf('/v5/payments%2Fsales/migrateCardOnFile'), undefined, 'escapes alone take no segment off')
})

t.test(
  'a mount point holding an escaped ?, # or NUL: a router that matches segments first keeps it in its segment',
  async (t) => {
    const operationOf = operationsOf('')
    for (const front of ['/a%23', '/a%3F', '/a%3fb', '/a%00', '/a%2523', '/x/a%23/y']) {
      t.equal(operationOf(`${front}/payments/sales/migrateCardOnFile`, true), 'sale', front)
      t.equal(operationOf(`${front}/payments/authorizations/migrateRecurring`, true), 'recurring', front)
      t.equal(operationOf(`${front}/payments/sales/migrateCardOnFile`), undefined, `${front}: not to the proxy`)
    }
    t.equal(canonicalPath('/a%23/payments'), '/a')
    t.equal(operationOf('/payments/sales/migrateCardOnFile%23/x'), 'sale', 'cut at the #, as a decoding reader cuts it')
    t.equal(
      operationOf('/payments/authorizations/migrateRecurring%3F/../../sales/migrateCardOnFile', true),
      'refused',
      'cut, the recurring authorization; whole, the sale',
    )
  },
)

t.test('a mounted path in front of which readers may differ is read every way', async (t) => {
  const operationOf = operationsOf('')
  for (const front of ['/a%2Fb', '/a.b', '/a\\b', '/a;b=1', '/a/./b'])
    t.equal(operationOf(`${front}/payments/sales/migrateCardOnFile`, true), 'sale', front)
  t.equal(operationOf('/a%2F..%2F../payments/sales/migrateCardOnFile', true), 'sale')
})

t.test('a path too long to read every way, that names an operation and may lose its front, is refused', async (t) => {
  const operationOf = operationsOf('')
  const padding = '/y'.repeat(300)
  t.equal(operationOf(`/x/..${padding}/../../payments/sales/migrateCardOnFile`), 'refused')
  t.equal(
    operationOf(`/x/..${'/y'.repeat(200)}/payments/sales/migrateCardOnFile`),
    'refused',
    'under the bound: read, no operation',
  )
  t.equal(operationOf(`/x/..${padding}/elsewhere`), undefined, 'naming none: not ours')
  t.equal(operationOf(`${padding}/payments/sales/migrateCardOnFile`, true), 'sale', 'nothing to lose: read')
})

t.test('a path led by several slashes is forwarded with one: every reader reads it alike', async (t) => {
  const targetOf = buildRouter('')
  t.match(targetOf('//evil/elsewhere?x=//y'), { ok: true, operation: undefined, path: '/evil/elsewhere?x=//y' })
  t.match(targetOf('/\\//a'), { path: '/a' })
  t.match(targetOf('http://h//payments/sales/migrateCardOnFile'), {
    operation: 'sale',
    path: '/payments/sales/migrateCardOnFile',
    host: 'h',
  })
  t.match(targetOf('/a//b'), { path: '/a//b' }, 'slashes inside are left as they came')
})

t.test(
  'trailing spaces and controls, and a decoded tab or newline, are dropped as WHATWG URL drops them',
  async (t) => {
    const operationOf = operationsOf('')
    t.equal(operationOf('/payments/sales/migrateCardOnFile%20'), 'sale')
    t.equal(operationOf('/payments/sales/migrate%09CardOnFile'), 'sale')
    t.equal(canonicalPath('/a%20%01/b'), '/a/b')
  },
)

t.test('base paths are normalized', async (t) => {
  t.equal(normalizeBasePath(''), '')
  t.equal(normalizeBasePath('/'), '')
  t.equal(normalizeBasePath('api/v6/'), '/api/v6')
  t.equal(normalizeBasePath('/api'), '/api')
  t.equal(normalizeBasePath('/api//'), '/api', 'every trailing slash')
})

t.test('the target reader, spelling by spelling: the exact verdict for each', async (t) => {
  const targetOf = { '': operationsOf(''), '/v6': operationsOf('/v6') }
  const sale = '/payments/sales/migrateCardOnFile'
  const recurring = '/payments/authorizations/migrateRecurring'
  for (const [basePath, path, mounted, expected, why] of [
    ['', '/.x./migrateCardOnFile', false, undefined, 'dots inside a segment take nothing off'],
    ['', `/x/..;xy/y${sale}`, false, 'refused', 'a dot segment with a parameter (Tomcat) may lose the front'],
    ['', `/x/..;/y${sale}`, false, 'refused', '... an empty one as well'],
    ['', `/.//%ff/${sale}`, false, 'sale', 'a dot segment first, then an empty one'],
    ['', `${sale}/x%00/..`, false, 'sale', 'a dot segment last: new URL resolves it before the NUL cuts'],
    ['', `/%252f%2E/%41%3f${recurring}`, false, 'recurring', 'an escaped dot segment, escapes decoded by a hop'],
    ['', `/%5c//paymentsmigrateRecurring\\abv6${recurring}`, false, 'refused', 'an authority ended by a backslash'],
    ['/v6', `/%5c;%5C/salesmigrateCardOnFile%5C/v6${sale}`, false, 'sale', 'read apart, each reading the sale'],
    ['', `http://h/.%00%2E%2e\\%2E.%2F%z${recurring}`, true, 'recurring', 'escaped dots between backslashes'],
    ['', `${recurring}%00/%2e%2e/%2e%2e/%2e%2e${sale}`, true, 'refused', 'under a mount as well: read as both'],
    ['', `${sale}v6`, true, undefined, 'the operation is the end of the path, not its start'],
    ['', `/a?/..${sale}`, false, undefined, 'the query takes no part'],
    ['', `/x%00\\..\\${sale.slice(1)}`, false, 'sale', 'backslashes around a dot segment, as WHATWG URL reads them'],
    ['', `//evil/x%00\\..\\${sale.slice(1)}`, false, 'sale', '... after an authority'],
    ['', '//migrateCardOnFile', false, 'refused', 'an authority with nothing after it reads as /'],
    ['', `/${sale}`, false, 'sale', 'read as a path, or forwarded with one slash'],
    ['', `/%5c%25255c%25255c/v6${sale}`, false, 'refused', 'behind three hops that decode, an authority: read apart'],
  ] as const)
    t.equal(targetOf[basePath](path, mounted), expected, `${path}: ${why}`)
})

t.test('every spelling of a dot segment, escaped dots in either case, is resolved before a NUL cuts', async (t) => {
  const operationOf = operationsOf('')
  for (const one of ['.', '%2e', '%2E']) {
    t.equal(operationOf(`/x%00/${one}/../payments/sales/migrateCardOnFile`), 'sale', one)
    for (const two of ['.', '%2e', '%2E'])
      t.equal(operationOf(`/x%00/${one}${two}/payments/sales/migrateCardOnFile`), 'sale', one + two)
  }
  t.equal(operationOf('/x%00/..%2e/payments/sales/migrateCardOnFile'), undefined, 'three dots are a name')
})

t.test('the bound on reading every way is 512 bytes, inclusive', async (t) => {
  const operationOf = operationsOf('')
  const path = (filler: number) => `/${'z'.repeat(filler)}/../payments/sales/migrateCardOnFile`
  t.equal(path(475).length, 512)
  t.equal(operationOf(path(475)), 'sale')
  t.equal(operationOf(path(476)), 'refused')
  t.equal(
    operationOf(`/x${'/y'.repeat(300)}/${'../'.repeat(301)}payments/sales/migrateCardOnFile`),
    'refused',
    'read as the sale, but too long to read every way',
  )
})

t.test('parseTarget and forwardedPath, exactly', async (t) => {
  for (const target of ['a/http://h/', 'xxxhttp://h/a'])
    t.match(parseTarget(target), { ok: false, status: 400 }, `${target}: the scheme starts the target`)
  t.same(parseTarget('http://h?q/x'), { path: '/?q/x', host: 'h' }, 'a query before any slash ends the authority')
  for (const [path, forwarded] of [
    ['', ''],
    ['a', 'a'],
    ['/a', '/a'],
    ['//', '/'],
    ['/\\a', '/a'],
    ['\\\\a//b', '/a//b'],
  ] as const)
    t.equal(forwardedPath(path), forwarded, JSON.stringify(path))
  const targetOf = buildRouter('')
  t.equal((targetOf('//evil/elsewhere?x=//y') as { path: string }).path, '/evil/elsewhere?x=//y')
  t.equal(canonicalPath('/a\\..\\b'), '/b', 'a backslash separates segments')
  t.equal(canonicalPath('/a%23b/c'), '/a', 'a decoded # ends the path')
})
