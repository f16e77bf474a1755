import t from 'tap'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { ACCESS_DENIED, WWW_AUTHENTICATE, checkEntityAccess, type Principal } from '../../lib/checks/auth.js'
import { hashPassword } from '../../lib/credentials/hash.js'
import { loadCredentials } from '../../lib/credentials/load.js'
import { buildChecks } from '../../lib/checks/index.js'
import { watchPolicies } from '../../lib/policy/store.js'
import { basic, bytes, saleBody, TEST_COST } from '../helpers/fixtures.js'

const dir = t.testdir({})
const file = join(dir, 'credentials.json')
await writeFile(
  file,
  JSON.stringify({
    users: [
      { username: 'shop-1', password: await hashPassword('s3cret', TEST_COST), entities: ['default'] },
      { username: 'market', password: await hashPassword('pf-pass', TEST_COST), entities: ['marketplace', 'default'] },
      { username: 'fresh', password: await hashPassword('right', TEST_COST), entities: [] },
    ],
  }),
)
const policies = await watchPolicies('policies')
t.teardown(() => policies.close())
const checks = buildChecks({ policies, authenticator: await loadCredentials(file, { maxFailures: 3 }) })

t.test(
  'check 1: missing, malformed, unknown or wrong credentials are 401 accessDenied with the challenge',
  async (t) => {
    for (const header of [undefined, 'Bearer abc', 'Basic !!', basic('shop-1', 'wrong'), basic('ghost', 's3cret')]) {
      const answer = await checks.authenticate(header)
      t.equal(answer, ACCESS_DENIED, String(header))
    }
    t.equal(ACCESS_DENIED.status, 401)
    t.equal(ACCESS_DENIED.body.errorName, 'accessDenied')
    t.same(ACCESS_DENIED.headers, { 'WWW-Authenticate': 'Basic realm="payments", charset="UTF-8"' })
    t.equal(WWW_AUTHENTICATE, 'Basic realm="payments", charset="UTF-8"')
  },
)

t.test(
  'check 1: the right credentials give the user and its entities; the repeat is answered from the cache',
  async (t) => {
    const principal = (await checks.authenticate(basic('shop-1', 's3cret'))) as Principal
    t.equal(principal.username, 'shop-1')
    t.same([...principal.entities], ['default'])
    t.equal(checks.authenticate(basic('shop-1', 's3cret')), principal, 'synchronous, no hashing')
  },
)

t.test('without an authenticator everybody is refused', async (t) => {
  t.equal(buildChecks({ policies }).authenticate(basic('shop-1', 's3cret')), ACCESS_DENIED)
})

t.test('check 9: a user may act only for its entities', async (t) => {
  const shop = (await checks.authenticate(basic('shop-1', 's3cret'))) as Principal
  const market = (await checks.authenticate(basic('market', 'pf-pass'))) as Principal
  t.equal(checks.checkBody('sale', bytes(saleBody({ entity: 'marketplace' })), shop), ACCESS_DENIED)
  t.equal(
    checks.checkBody('sale', bytes(saleBody({ entity: 'eu-tokens' })), shop),
    ACCESS_DENIED,
    'before the policy checks',
  )
  t.equal(
    checks.checkBody('sale', bytes(saleBody({ entity: 'nobody' })), shop),
    ACCESS_DENIED,
    'even for an unconfigured entity',
  )
  t.ok(checks.checkBody('sale', bytes(saleBody({ entity: 'default' })), shop).ok)
  t.ok(checks.checkBody('sale', bytes(saleBody({ entity: 'default' })), market).ok)
  t.match(checks.checkBody('sale', bytes(saleBody({ entity: 'marketplace' })), market), {
    ok: false,
    body: { errorName: 'bodyDoesNotMatchSchema' },
  })
  t.equal(checkEntityAccess(shop, 'default'), undefined)
  t.equal(checkEntityAccess(shop, 'other'), ACCESS_DENIED)
})

t.test('a throttled user gets 401 without a hash being run', async (t) => {
  for (const guess of ['a', 'b', 'c']) t.equal(await checks.authenticate(basic('fresh', guess)), ACCESS_DENIED)
  t.equal(
    checks.authenticate(basic('fresh', 'right')),
    ACCESS_DENIED,
    'refused synchronously, even with the right password',
  )
  for (const guess of ['a', 'b', 'c']) t.equal(await checks.authenticate(basic('market', guess)), ACCESS_DENIED)
  const spelt = `basic   ${basic('market', 'pf-pass').slice(6)}`
  t.notOk(checks.authenticate(spelt) instanceof Promise, 'a credential already verified stays cached, however spelt')
})
