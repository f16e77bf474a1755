import t from 'tap'
import { hashPassword, parseHash, verifyPassword } from '../../lib/credentials/hash.js'
import { basic, TEST_COST as CHEAP } from '../helpers/fixtures.js'

t.test('hashPassword: scrypt with its parameters and a random salt in the string', async (t) => {
  const hash = await hashPassword('s3cret')
  t.match(hash, /^scrypt\$16384\$8\$1\$[A-Za-z0-9+/]{22}==\$[A-Za-z0-9+/]{43}=$/)
  t.not(await hashPassword('s3cret'), hash, 'a new salt each time')
  t.ok(await verifyPassword('s3cret', hash))
  t.notOk(await verifyPassword('s3cret ', hash))
  t.notOk(await verifyPassword('', hash))
})

t.test('raised parameters still verify, because they travel in the hash', async (t) => {
  const hash = await hashPassword('pw', { N: 32768, r: 8, p: 2 })
  t.match(hash, /^scrypt\$32768\$8\$2\$/)
  t.ok(await verifyPassword('pw', hash))
})

t.test('passwords are compared after NFC normalization (RFC 7613 OpaqueString)', async (t) => {
  const hash = await hashPassword('caf\u00e9', CHEAP)
  t.ok(await verifyPassword('cafe\u0301', hash))
})

t.test('a malformed hash matches nothing', async (t) => {
  const good = await hashPassword('pw', CHEAP)
  const [, , , , salt, key] = good.split('$')
  const malformed = [
    '',
    'pw',
    `bcrypt$1024$8$1$${salt}$${key}`,
    `scrypt$1024$8$1$${salt}`,
    `scrypt$1000$8$1$${salt}$${key}`,
    `scrypt$1$8$1$${salt}$${key}`,
    `scrypt$2097152$8$1$${salt}$${key}`,
    `scrypt$01024$8$1$${salt}$${key}`,
    `scrypt$1024$0$1$${salt}$${key}`,
    `scrypt$1024$33$1$${salt}$${key}`,
    `scrypt$1024$8$17$${salt}$${key}`,
    `scrypt$1024$8$x$${salt}$${key}`,
    `scrypt$1024$8$1$$${key}`,
    `scrypt$1024$8$1$${salt}$`,
    `scrypt$1024$8$1$c2hvcnQ=$${key}`,
    `scrypt$1024$8$1$${salt}$${key?.replace(/=$/, '')}`,
    `scrypt$1024$8$1$${salt}$${key}$`,
  ]
  t.ok(parseHash(good))
  for (const hash of malformed) {
    t.equal(parseHash(hash), undefined, hash)
    t.notOk(await verifyPassword('pw', hash), hash)
  }
})

t.test('the password comparison is timingSafeEqual, on the derived and the stored hash', async (t) => {
  const real = await import('node:crypto')
  let answer: boolean | undefined
  const calls: [Buffer, Buffer][] = []
  const spy = (a: NodeJS.ArrayBufferView, b: NodeJS.ArrayBufferView): boolean => {
    calls.push([Buffer.from(a as Uint8Array), Buffer.from(b as Uint8Array)])
    return answer ?? real.timingSafeEqual(a, b)
  }
  const mocks = { 'node:crypto': { ...real, timingSafeEqual: spy } }
  const mocked = await t.mockImport<typeof import('../../lib/credentials/hash.js')>(
    '../../lib/credentials/hash.js',
    mocks,
  )
  // The store gets this very module, not one its own import would load: a full run's two jobs loaded it unmocked now and then.
  const { CredentialStore } = await t.mockImport<typeof import('../../lib/credentials/store.js')>(
    '../../lib/credentials/store.js',
    { ...mocks, '../../lib/credentials/hash.js': mocked },
  )
  const params = { N: 16, r: 1, p: 1 }
  const hash = await mocked.hashPassword('caf\u00e9', params)
  const stored = mocked.parseHash(hash)!
  const derived = real.scryptSync('caf\u00e9', stored.salt, stored.hash.length, params)

  t.ok(await mocked.verifyPassword('cafe\u0301', hash), 'the real comparison: a match')
  t.equal(calls.length, 1, 'one comparison per verification')
  t.same(calls[0], [derived, stored.hash], 'the derived key against the stored one')

  answer = false
  t.notOk(await mocked.verifyPassword('caf\u00e9', hash), 'timingSafeEqual says no: the right password fails')
  const users = new CredentialStore([{ username: 'shop-1', password: hash, entities: ['default'] }])
  t.match(
    await users.authenticate(basic('shop-1', 'caf\u00e9')),
    { ok: false, status: 401 },
    'the store refuses it too',
  )
  answer = true
  t.ok(await mocked.verifyPassword('wrong', hash), 'timingSafeEqual says yes: nothing else compares')
  t.equal(calls.length, 4)
})
