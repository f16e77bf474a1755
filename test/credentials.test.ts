import t from 'tap'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { ACCESS_DENIED, type Principal } from '../lib/checks/auth.js'
import {
  CredentialStore,
  hashPassword,
  loadCredentials,
  parseBasic,
  parseHash,
  verifyPassword,
  type CredentialStoreOptions,
} from '../lib/credentials.js'
import type { Rejection } from '../lib/errors.js'

/** Cheap scrypt parameters, so the throttle tests do not spend seconds hashing. */
const CHEAP = { N: 1024, r: 8, p: 1 }

const basic = (username: string, password: string) => `Basic ${Buffer.from(`${username}:${password}`, 'utf8').toString('base64')}`

function clock(): { now: () => number; advance: (ms: number) => void } {
  let time = 1_000_000
  return { now: () => time, advance: (ms) => void (time += ms) }
}

async function store(options: CredentialStoreOptions = {}): Promise<CredentialStore> {
  return new CredentialStore(
    [
      { username: 'shop-1', password: await hashPassword('s3cret', CHEAP), entities: ['default', 'eu-tokens'] },
      { username: 'zoë', password: await hashPassword('pässword', CHEAP), entities: ['marketplace'] },
    ],
    options,
  )
}

function isPrincipal(value: Principal | Rejection): value is Principal {
  return 'username' in value
}

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

t.test('parseBasic follows RFC 7617', async (t) => {
  t.same(parseBasic(basic('shop-1', 's3cret')), { username: 'shop-1', password: 's3cret' })
  t.same(parseBasic(`bAsIc   ${basic('a', 'b').slice(6)}`), { username: 'a', password: 'b' }, 'scheme is case-insensitive')
  t.same(parseBasic(basic('a', 'p:w:d')), { username: 'a', password: 'p:w:d' }, 'the first colon splits')
  t.same(parseBasic(basic('zoë', 'pässword')), { username: 'zoë', password: 'pässword' }, 'UTF-8')
  t.same(parseBasic(basic('a', '')), { username: 'a', password: '' })
  const refused = [
    '',
    'Basic',
    'Basic ',
    `Bearer ${basic('a', 'b').slice(6)}`,
    `Basic${basic('a', 'b').slice(6)}`,
    `Basic ${Buffer.from('no-colon').toString('base64')}`,
    basic('', 'pw'),
    basic('a\u0000', 'pw'),
    basic('a', 'p\nw'),
    `Basic ${Buffer.from([0x61, 0x3a, 0xff]).toString('base64')}`,
    'Basic YTpiYw',
    'Basic YTpiYw=',
    'Basic !!!!',
    `Basic ${basic('a', 'b').slice(6)} extra`,
  ]
  for (const header of refused) t.equal(parseBasic(header), undefined, JSON.stringify(header))
})

t.test('authenticate: right credentials give the principal, anything else ACCESS_DENIED', async (t) => {
  const users = await store()
  t.equal(users.size, 2)
  const principal = await users.authenticate(basic('shop-1', 's3cret'))
  t.ok(isPrincipal(principal))
  t.equal((principal as Principal).username, 'shop-1')
  t.same([...(principal as Principal).entities], ['default', 'eu-tokens'])
  t.ok(isPrincipal(await users.authenticate(basic('zoë', 'pässword'))))
  t.equal(users.authenticate(undefined), ACCESS_DENIED)
  t.equal(users.authenticate('Basic !!'), ACCESS_DENIED)
  t.equal(await users.authenticate(basic('shop-1', 'wrong')), ACCESS_DENIED)
  t.equal(await users.authenticate(basic('nobody', 's3cret')), ACCESS_DENIED)
  t.equal(await users.authenticate(basic('zoë', 'pässword ')), ACCESS_DENIED)
  t.equal(ACCESS_DENIED.status, 401)
  t.equal(ACCESS_DENIED.headers?.['WWW-Authenticate'], 'Basic realm="payments", charset="UTF-8"')
})

t.test('a successful check is cached: the next one answers synchronously, until the TTL', async (t) => {
  const time = clock()
  const users = await store({ cacheTtlMs: 1000, now: time.now })
  const header = basic('shop-1', 's3cret')
  const first = users.authenticate(header)
  t.ok(first instanceof Promise, 'the first check hashes')
  const principal = await first
  const second = users.authenticate(header)
  t.notOk(second instanceof Promise, 'a cache hit is synchronous')
  t.equal(second, principal)
  t.ok(users.authenticate(`basic ${header.slice(6)}`) instanceof Promise, 'keyed by the whole header')
  time.advance(1001)
  t.ok(users.authenticate(header) instanceof Promise, 'expired after the TTL')
})

t.test('a failed check is not cached', async (t) => {
  const users = await store()
  const header = basic('shop-1', 'wrong')
  t.equal(await users.authenticate(header), ACCESS_DENIED)
  t.ok(users.authenticate(header) instanceof Promise)
})

t.test('the cache is bounded', async (t) => {
  const users = await store({ cacheMax: 1 })
  const a = basic('shop-1', 's3cret')
  const b = basic('zoë', 'pässword')
  await users.authenticate(a)
  await users.authenticate(b)
  t.notOk(users.authenticate(b) instanceof Promise)
  t.ok(users.authenticate(a) instanceof Promise, 'evicted')
})

t.test('concurrent checks of one header share one verification', async (t) => {
  const users = await store()
  const header = basic('shop-1', 's3cret')
  const first = users.authenticate(header)
  t.equal(users.authenticate(header), first)
  t.ok(isPrincipal(await first))
})

t.test('after 10 failures in the window a user is refused, without hashing, for the cool-down', async (t) => {
  const time = clock()
  const users = await store({ now: time.now })
  for (let i = 0; i < 10; i++) {
    const answer = users.authenticate(basic('shop-1', `guess-${i}`))
    t.ok(answer instanceof Promise, `attempt ${i + 1} is verified`)
    t.equal(await answer, ACCESS_DENIED)
  }
  const locked = users.authenticate(basic('shop-1', 's3cret'))
  t.equal(locked, ACCESS_DENIED, 'refused synchronously: no scrypt ran, even for the right password')
  time.advance(59_999)
  t.equal(users.authenticate(basic('shop-1', 's3cret')), ACCESS_DENIED)
  t.ok(isPrincipal(await users.authenticate(basic('zoë', 'pässword'))), 'other users are not affected')
  time.advance(1)
  const after = users.authenticate(basic('shop-1', 's3cret'))
  t.ok(after instanceof Promise)
  t.ok(isPrincipal(await after), 'the cool-down is over')
})

t.test('a user whose check is cached keeps working while its username is locked out', async (t) => {
  const users = await store({ maxFailures: 2 })
  const header = basic('shop-1', 's3cret')
  await users.authenticate(header)
  await users.authenticate(basic('shop-1', 'x'))
  await users.authenticate(basic('shop-1', 'y'))
  t.equal(users.authenticate(basic('shop-1', 'z')), ACCESS_DENIED)
  t.ok(isPrincipal(users.authenticate(header) as Principal))
})

t.test('unknown usernames are throttled the same way', async (t) => {
  const users = await store({ maxFailures: 3 })
  for (let i = 0; i < 3; i++) {
    const answer = users.authenticate(basic('ghost', `guess-${i}`))
    t.ok(answer instanceof Promise, 'verified against the dummy hash')
    t.equal(await answer, ACCESS_DENIED)
  }
  t.equal(users.authenticate(basic('ghost', 'another')), ACCESS_DENIED)
})

t.test('failures older than the window are forgotten; a success resets the count', async (t) => {
  const time = clock()
  const users = await store({ maxFailures: 3, failureWindowMs: 1000, now: time.now })
  await users.authenticate(basic('shop-1', 'a'))
  await users.authenticate(basic('shop-1', 'b'))
  time.advance(1000)
  await users.authenticate(basic('shop-1', 'c'))
  const d = users.authenticate(basic('shop-1', 'd'))
  t.ok(d instanceof Promise, 'only one failure in this window')
  await d
  t.ok(isPrincipal(await users.authenticate(basic('shop-1', 's3cret'))))
  await users.authenticate(basic('shop-1', 'f'))
  await users.authenticate(basic('shop-1', 'g'))
  const h = users.authenticate(basic('shop-1', 'h'))
  t.ok(h instanceof Promise, 'the success started the count again')
  await h
  t.equal(users.authenticate(basic('shop-1', 'i')), ACCESS_DENIED)
})

t.test('verifications still running count against the limit, so a burst cannot start more hashes', async (t) => {
  const users = await store({ maxFailures: 3 })
  const answers = Array.from({ length: 5 }, (_, i) => users.authenticate(basic('shop-1', `burst-${i}`)))
  t.same(
    answers.map((answer) => answer instanceof Promise),
    [true, true, true, false, false],
  )
  for (const answer of await Promise.all(answers)) t.equal(answer, ACCESS_DENIED)
  t.equal(users.authenticate(basic('shop-1', 's3cret')), ACCESS_DENIED, 'three failures: locked')
})

t.test('a store without users refuses everybody', async (t) => {
  const users = new CredentialStore([])
  t.equal(users.size, 0)
  t.equal(await users.authenticate(basic('a', 'b')), ACCESS_DENIED)
})

t.test('the constructor refuses duplicate usernames and malformed hashes', async (t) => {
  const hash = await hashPassword('pw', CHEAP)
  t.throws(
    () => new CredentialStore([{ username: 'a', password: hash, entities: [] }, { username: 'a', password: hash, entities: [] }]),
    { code: 'ECREDENTIALS', message: 'user "a" is listed twice' },
  )
  t.throws(() => new CredentialStore([{ username: 'a', password: 'pw', entities: [] }]), {
    code: 'ECREDENTIALS',
    message: 'user "a": password is not a hash from payments-gate hash-password',
  })
})

t.test('loadCredentials reads and validates the file', async (t) => {
  const hash = await hashPassword('s3cret', CHEAP)
  const user = { username: 'shop-1', password: hash, entities: ['default'] }
  const dir = t.testdir({
    'good.json': JSON.stringify({ users: [user] }),
    'not-json.json': '{ users',
    'extra-key.json': JSON.stringify({ users: [{ ...user, role: 'admin' }] }),
    'extra-top.json': JSON.stringify({ users: [], version: 2 }),
    'colon.json': JSON.stringify({ users: [{ ...user, username: 'a:b' }] }),
    'no-entities.json': JSON.stringify({ users: [{ username: 'a', password: hash }] }),
    'twice.json': JSON.stringify({ users: [user, user] }),
    'clear.json': JSON.stringify({ users: [{ ...user, password: 's3cret' }] }),
  })
  const users = await loadCredentials(join(dir, 'good.json'), { cacheMax: 5 })
  t.equal(users.size, 1)
  t.ok(isPrincipal(await users.authenticate(basic('shop-1', 's3cret'))))
  const cases: Array<[string, RegExp]> = [
    ['missing.json', /missing\.json: no such file or folder$/],
    ['not-json.json', /not-json\.json: not JSON: /],
    ['extra-key.json', /extra-key\.json: \$\.users\[0\]\.role: /],
    ['extra-top.json', /extra-top\.json: \$\.version: /],
    ['colon.json', /colon\.json: \$\.users\[0\]\.username: /],
    ['no-entities.json', /no-entities\.json: \$\.users\[0\]\.entities: /],
    ['twice.json', /twice\.json: user "shop-1" is listed twice$/],
    ['clear.json', /clear\.json: user "shop-1": password is not a hash/],
  ]
  for (const [name, message] of cases) {
    const error = await loadCredentials(join(dir, name)).then(
      () => undefined,
      (error: unknown) => error as Error & { code?: string },
    )
    t.equal(error?.code, 'ECREDENTIALS', name)
    t.match(error?.message, message, name)
    t.notMatch(error?.message, /\n/, 'one line')
    t.ok(error?.message.startsWith(join(dir, name)), 'names the file first')
  }
})

t.test('the clear password never appears in an error', async (t) => {
  const dir = t.testdir({ 'clear.json': JSON.stringify({ users: [{ username: 'u', password: 'hunter2', entities: [] }] }) })
  await t.rejects(loadCredentials(join(dir, 'clear.json')), { message: /^(?!.*hunter2)/ })
  await writeFile(join(dir, 'clear.json'), '{}')
  await t.rejects(loadCredentials(join(dir, 'clear.json')), { code: 'ECREDENTIALS', message: /\$\.users: / })
})

t.test('failures spread over the window lock the user out for the full cool-down after the last one', async (t) => {
  const time = clock()
  // scrypt's smallest cost: this test is about the clock, not the hash.
  const cheapest = { N: 16, r: 1, p: 1 }
  const users = new CredentialStore([{ username: 'spread', password: await hashPassword('right', cheapest), entities: ['default'] }], {
    maxFailures: 10,
    failureWindowMs: 60_000,
    coolDownMs: 60_000,
    now: time.now,
  })
  // Ten failures over 59 s of the 60 s window: the first at 0, the tenth at 59 s.
  for (let i = 0; i < 10; i++) {
    if (i > 0) time.advance(i === 9 ? 59_000 - 8 * 6_500 : 6_500)
    const answer = users.authenticate(basic('spread', `guess-${i}`))
    t.ok(answer instanceof Promise, `failure ${i + 1} is verified`)
    t.equal(await answer, ACCESS_DENIED)
  }
  // The lock-out counts from the tenth failure, not from the window's start: refused until 60 s after it.
  for (const step of [1, 999, 30_000, 28_999]) {
    time.advance(step)
    t.equal(users.authenticate(basic('spread', 'right')), ACCESS_DENIED, 'refused without hashing, even the right password')
  }
  time.advance(1)
  const after = users.authenticate(basic('spread', 'right'))
  t.ok(after instanceof Promise, '60 s after the tenth failure the password is checked again')
  t.ok(isPrincipal(await after), 'and accepted')
})

t.test('the password comparison is timingSafeEqual, on the derived and the stored hash', async (t) => {
  const real = await import('node:crypto')
  let answer: boolean | undefined
  const calls: [Buffer, Buffer][] = []
  const spy = (a: NodeJS.ArrayBufferView, b: NodeJS.ArrayBufferView): boolean => {
    calls.push([Buffer.from(a as Uint8Array), Buffer.from(b as Uint8Array)])
    return answer ?? real.timingSafeEqual(a, b)
  }
  const mocked = await t.mockImport<typeof import('../lib/credentials.js')>('../lib/credentials.js', {
    'node:crypto': { ...real, timingSafeEqual: spy },
  })
  const params = { N: 16, r: 1, p: 1 }
  const hash = await mocked.hashPassword('caf\u00e9', params)
  const stored = mocked.parseHash(hash)!
  const derived = real.scryptSync('caf\u00e9', stored.salt, stored.hash.length, params)

  t.ok(await mocked.verifyPassword('cafe\u0301', hash), 'the real comparison: a match')
  t.equal(calls.length, 1, 'one comparison per verification')
  t.same(calls[0], [derived, stored.hash], 'the derived key against the stored one')

  answer = false
  t.notOk(await mocked.verifyPassword('caf\u00e9', hash), 'timingSafeEqual says no: the right password fails')
  const users = new mocked.CredentialStore([{ username: 'shop-1', password: hash, entities: ['default'] }])
  t.match(await users.authenticate(basic('shop-1', 'caf\u00e9')), { ok: false, status: 401 }, 'the store refuses it too')
  answer = true
  t.ok(await mocked.verifyPassword('wrong', hash), 'timingSafeEqual says yes: nothing else compares')
  t.equal(calls.length, 4)
})
