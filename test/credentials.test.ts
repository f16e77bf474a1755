import t from 'tap'
import { rename, symlink, unlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { ACCESS_DENIED, type Principal } from '../lib/checks/auth.js'
import {
  CredentialStore,
  hashPassword,
  loadCredentials,
  parseBasic,
  parseHash,
  verifyPassword,
  watchCredentials,
  type CredentialStoreOptions,
  type WatchCredentialsOptions,
} from '../lib/credentials.js'
import type { ReloadOutcome } from '../lib/watch.js'
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

t.test('replace: a removed user or a changed password is refused at once, even where cached; the rest stays cached', async (t) => {
  const users = await store({ maxFailures: 3 })
  const shop = basic('shop-1', 's3cret')
  const zoe = basic('zoë', 'pässword')
  await users.authenticate(shop)
  const zoePrincipal = await users.authenticate(zoe)
  t.notOk(users.authenticate(shop) instanceof Promise, 'both cached')
  await users.authenticate(basic('shop-1', 'wrong-1'))
  await users.authenticate(basic('shop-1', 'wrong-2'))
  users.replace([
    { username: 'shop-1', password: await hashPassword('rotated', CHEAP), entities: ['default', 'eu-tokens'] },
    { username: 'new', password: await hashPassword('n3w', CHEAP), entities: [] },
  ])
  t.equal(users.size, 2)
  t.equal(await users.authenticate(zoe), ACCESS_DENIED, 'removed: refused although its check was cached')
  t.ok(isPrincipal(await users.authenticate(basic('new', 'n3w'))), 'added')
  const old = users.authenticate(shop)
  t.ok(old instanceof Promise, 'changed password: the cached check is gone')
  t.equal(await old, ACCESS_DENIED, 'and the old password is refused')
  t.equal(users.authenticate(basic('shop-1', 'rotated')), ACCESS_DENIED, 'the throttle kept its counts: that third failure locked the user')
  t.ok(isPrincipal(zoePrincipal as Principal))
})

t.test('replace: an unchanged user keeps its cached check; changed entities are a new principal', async (t) => {
  const shopHash = await hashPassword('s3cret', CHEAP)
  const zoeHash = await hashPassword('pässword', CHEAP)
  const users = new CredentialStore([
    { username: 'shop-1', password: shopHash, entities: ['default'] },
    { username: 'zoë', password: zoeHash, entities: ['marketplace'] },
  ])
  const shop = await users.authenticate(basic('shop-1', 's3cret'))
  await users.authenticate(basic('zoë', 'pässword'))
  users.replace([
    { username: 'zoë', password: zoeHash, entities: ['marketplace', 'default'] },
    { username: 'shop-1', password: shopHash, entities: ['default'] },
  ])
  t.equal(users.authenticate(basic('shop-1', 's3cret')), shop, 'the same principal, answered from the cache')
  const zoe = users.authenticate(basic('zoë', 'pässword'))
  t.ok(zoe instanceof Promise, 'entities changed: checked again')
  t.same([...((await zoe) as Principal).entities], ['marketplace', 'default'])
  users.replace([{ username: 'zoë', password: zoeHash, entities: ['marketplace', 'eu-tokens'] }])
  t.ok(users.authenticate(basic('zoë', 'pässword')) instanceof Promise, 'as many entities, other ones: checked again')
})

t.test('replace: a refused list changes nothing', async (t) => {
  const users = await store()
  const hash = await hashPassword('x', CHEAP)
  t.throws(() => users.replace([{ username: 'a', password: hash, entities: [] }, { username: 'a', password: hash, entities: [] }]), { code: 'ECREDENTIALS', message: /listed twice/ })
  t.throws(() => users.replace([{ username: 'a', password: 'clear', entities: [] }]), { code: 'ECREDENTIALS' })
  t.equal(users.size, 2)
  t.ok(isPrincipal(await users.authenticate(basic('shop-1', 's3cret'))))
})

t.test('a check running while the users are replaced answers as the users now in force', async (t) => {
  const users = await store()
  const rotated = await hashPassword('rotated', CHEAP)
  const old = users.authenticate(basic('shop-1', 's3cret'))
  const renewed = users.authenticate(basic('shop-1', 'rotated'))
  const gone = users.authenticate(basic('zoë', 'pässword'))
  // One turn of the microtask queue: each check has taken its user and started hashing (on the thread pool).
  await Promise.resolve()
  users.replace([{ username: 'shop-1', password: rotated, entities: ['default'] }])
  t.equal(await old, ACCESS_DENIED, 'the old password, checked against the old hash, is refused once the new one is in force')
  t.ok(isPrincipal(await renewed), 'the new password, started before the switch, is accepted')
  t.equal(await gone, ACCESS_DENIED)
  t.notOk(users.authenticate(basic('shop-1', 'rotated')) instanceof Promise, 'and cached')
})

/** Polls until `condition` holds; fails after two seconds (a change takes effect within about a second). */
async function eventually(condition: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await condition()) return
    await sleep(10)
  }
  throw new Error('condition not met within 2 s')
}

async function credentialsText(users: Record<string, string>): Promise<string> {
  const list = await Promise.all(Object.entries(users).map(async ([username, password]) => ({ username, password: await hashPassword(password, CHEAP), entities: ['default'] })))
  return JSON.stringify({ users: list })
}

function watching() {
  const outcomes: ReloadOutcome[] = []
  const lines: { level: string; fields: Record<string, unknown>; message: string }[] = []
  const logger = {
    info: (fields: Record<string, unknown>, message: string) => void lines.push({ level: 'info', fields, message }),
    warn: (fields: Record<string, unknown>, message: string) => void lines.push({ level: 'warn', fields, message }),
  } as unknown as NonNullable<WatchCredentialsOptions['logger']>
  return { outcomes, lines, options: { logger, onReload: (outcome: ReloadOutcome) => void outcomes.push(outcome), debounceMs: 10 } }
}

const accepts = async (users: { authenticate: CredentialStore['authenticate'] }, username: string, password: string) => isPrincipal(await users.authenticate(basic(username, password)))

t.test('watchCredentials: a changed file takes effect without a restart; a refused one keeps the last good users, reported once', async (t) => {
  const dir = t.testdir({ 'credentials.json': await credentialsText({ 'shop-1': 'old', other: 'same' }) })
  const file = join(dir, 'credentials.json')
  const log = watching()
  const users = await watchCredentials(file, log.options)
  t.teardown(() => users.close())
  t.equal(users.size, 2)
  t.ok(await accepts(users, 'shop-1', 'old'))
  await writeFile(file, await credentialsText({ 'shop-1': 'new', other: 'same' }))
  await eventually(() => accepts(users, 'shop-1', 'new'))
  t.notOk(await accepts(users, 'shop-1', 'old'), 'the old password is refused')
  t.same(log.outcomes, [{ applied: true, refused: [], refusedNow: 0 }])
  t.match(log.lines, [{ level: 'info', fields: { file, users: 2 }, message: 'credentials reloaded' }])

  await writeFile(file, '{"users": [')
  await eventually(() => log.outcomes.length === 2)
  t.match(log.outcomes[1], { applied: false, refused: [{ file, reason: /^not JSON: / }], refusedNow: 1 })
  await sleep(1200)
  t.equal(log.outcomes.length, 2, 'the re-scans found the same refused version: nothing more reported')
  t.equal(log.lines.filter((line) => line.level === 'warn').length, 1, 'logged once')
  t.ok(await accepts(users, 'shop-1', 'new'), 'the last good users stay in force')
  await unlink(file)
  await eventually(() => log.outcomes.length === 3)
  t.match(log.outcomes[2], { applied: false, refused: [{ file, reason: /ENOENT/ }], refusedNow: 1 })
  t.ok(await accepts(users, 'other', 'same'))

  // Back to the version in force: nothing changes, but the file is no longer refused.
  await writeFile(file, await credentialsText({ 'shop-1': 'new', other: 'same' }))
  await eventually(() => log.outcomes.length === 4)
  t.same(log.outcomes[3], { applied: true, refused: [], refusedNow: 0 }, 'another text with the same users is a new version applied')
})

t.test('watchCredentials: back to the very text in force after a refused version reports that nothing is refused', async (t) => {
  const text = await credentialsText({ 'shop-1': 'pw' })
  const dir = t.testdir({ 'credentials.json': text })
  const file = join(dir, 'credentials.json')
  const log = watching()
  const users = await watchCredentials(file, { ...log.options, debounceMs: 60_000, rescanMs: 60_000 })
  t.teardown(() => users.close())
  await writeFile(file, JSON.stringify({ users: [{ username: 'a', password: 'clear', entities: [] }] }))
  await users.reload()
  t.match(log.outcomes, [{ applied: false, refused: [{ file, reason: /password is not a hash/ }], refusedNow: 1 }])
  await users.reload()
  t.equal(log.outcomes.length, 2, 'a reload asked for reports the refused file again')
  await writeFile(file, text)
  await users.reload()
  t.same(log.outcomes[2], { applied: true, refused: [], refusedNow: 0 }, 'asked for: counted as applied')
  await users.reload()
  t.same(log.outcomes[3], { applied: true, refused: [], refusedNow: 0 })
  t.equal(log.lines.filter((line) => line.message === 'credentials reloaded').length, 2)
})

t.test('watchCredentials: re-reads that find the file as it was report nothing', async (t) => {
  const dir = t.testdir({ 'credentials.json': await credentialsText({ u: 'pw' }) })
  const log = watching()
  const users = await watchCredentials(join(dir, 'credentials.json'), { ...log.options, rescanMs: 10 })
  t.teardown(() => users.close())
  await sleep(150)
  t.same(log.outcomes, [])
  t.same(log.lines, [])
})

t.test("watchCredentials: an editor's rename and a Kubernetes Secret's ..data swap are both picked up", async (t) => {
  const dir = t.testdir({ 'credentials.json': await credentialsText({ u: 'one' }) })
  const users = await watchCredentials(join(dir, 'credentials.json'), { debounceMs: 10 })
  t.teardown(() => users.close())
  await writeFile(join(dir, '.credentials.json.tmp'), await credentialsText({ u: 'two' }))
  await rename(join(dir, '.credentials.json.tmp'), join(dir, 'credentials.json'))
  await eventually(() => accepts(users, 'u', 'two'))

  // A Secret is mounted as files that link through `..data` to a versioned folder, swapped by a rename.
  const root = t.testdir({ v1: { 'credentials.json': await credentialsText({ k: 'v1' }) }, v2: { 'credentials.json': await credentialsText({ k: 'v2' }) } })
  await symlink('v1', join(root, '..data'))
  await symlink(join('..data', 'credentials.json'), join(root, 'credentials.json'))
  const mounted = await watchCredentials(join(root, 'credentials.json'), { debounceMs: 10 })
  t.teardown(() => mounted.close())
  t.ok(await accepts(mounted, 'k', 'v1'))
  await symlink('v2', join(root, '..data_tmp'))
  await rename(join(root, '..data_tmp'), join(root, '..data'))
  await eventually(() => accepts(mounted, 'k', 'v2'))
  t.notOk(await accepts(mounted, 'k', 'v1'))
})

t.test('watchCredentials: a bad file at start is an ECREDENTIALS error naming it; without a logger or listener a reload is quiet', async (t) => {
  const dir = t.testdir({ 'bad.json': '{"users": 1}', 'good.json': await credentialsText({ a: 'b' }) })
  await t.rejects(watchCredentials(join(dir, 'bad.json')), { code: 'ECREDENTIALS', message: /bad\.json: \$\.users: / })
  await t.rejects(watchCredentials(join(dir, 'missing.json')), { code: 'ECREDENTIALS', message: /missing\.json: ENOENT/ })
  const users = await watchCredentials(join(dir, 'good.json'), { rescanMs: 60_000 })
  await users.reload()
  await writeFile(join(dir, 'good.json'), '[]')
  await users.reload()
  t.ok(await accepts(users, 'a', 'b'))
  users.close()
})
