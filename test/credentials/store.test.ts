import t from 'tap'
import { ACCESS_DENIED, type Principal } from '../../lib/checks/auth.js'
import { hashPassword } from '../../lib/credentials/hash.js'
import { CredentialStore, HASHING_IS_BUSY, type CredentialStoreOptions } from '../../lib/credentials/store.js'
import { MemoryLoginThrottle } from '../../lib/login-throttle.js'
import { basic, isPrincipal, TEST_COST as CHEAP } from '../helpers/fixtures.js'
import { until } from '../helpers/wait.js'

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
  t.equal(users.authenticate('Basic YTpiYw'), ACCESS_DENIED, 'base64 that is not canonical')
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
  time.advance(1001)
  t.ok(users.authenticate(header) instanceof Promise, 'expired after the TTL')
})

t.test('the cache is keyed on the credentials, whatever the scheme case and spaces', async (t) => {
  const users = await store()
  const token = basic('shop-1', 's3cret').slice(6)
  const principal = await users.authenticate(`Basic ${token}`)
  t.ok(isPrincipal(principal))
  for (const spelling of [`basic ${token}`, `BASIC     ${token}`, `bAsIc ${token}  `])
    t.equal(users.authenticate(spelling), principal, `${JSON.stringify(spelling)} is a cache hit, not a new hash`)
})

t.test('a cached check in use stays cached: each use starts its time again', async (t) => {
  const time = clock()
  const users = await store({ cacheTtlMs: 1000, now: time.now })
  const header = basic('shop-1', 's3cret')
  const principal = await users.authenticate(header)
  for (let i = 0; i < 5; i++) {
    time.advance(900)
    t.equal(users.authenticate(header), principal, `used again after ${(i + 1) * 900} ms: still cached`)
  }
  time.advance(1001)
  t.ok(users.authenticate(header) instanceof Promise, 'unused for longer than the TTL: expired')
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
    () =>
      new CredentialStore([
        { username: 'a', password: hash, entities: [] },
        { username: 'a', password: hash, entities: [] },
      ]),
    { code: 'ECREDENTIALS', message: 'user "a" is listed twice' },
  )
  t.throws(() => new CredentialStore([{ username: 'a', password: 'pw', entities: [] }]), {
    code: 'ECREDENTIALS',
    message: 'user "a": password is not a hash from payments-gate hash-password',
  })
})

t.test('failures spread over the window lock the user out for the full cool-down after the last one', async (t) => {
  const time = clock()
  // scrypt's smallest cost: this test is about the clock, not the hash.
  const cheapest = { N: 16, r: 1, p: 1 }
  const users = new CredentialStore(
    [{ username: 'spread', password: await hashPassword('right', cheapest), entities: ['default'] }],
    {
      maxFailures: 10,
      failureWindowMs: 60_000,
      coolDownMs: 60_000,
      now: time.now,
    },
  )
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
    t.equal(
      users.authenticate(basic('spread', 'right')),
      ACCESS_DENIED,
      'refused without hashing, even the right password',
    )
  }
  time.advance(1)
  const after = users.authenticate(basic('spread', 'right'))
  t.ok(after instanceof Promise, '60 s after the tenth failure the password is checked again')
  t.ok(isPrincipal(await after), 'and accepted')
})

t.test(
  'replace: a removed user or a changed password is refused at once, even where cached; the rest stays cached',
  async (t) => {
    const users = await store({ maxFailures: 3 })
    const shop = basic('shop-1', 's3cret')
    const zoe = basic('zoë', 'pässword')
    await users.authenticate(shop)
    const zoePrincipal = await users.authenticate(zoe)
    t.notOk(users.authenticate(shop) instanceof Promise, 'both cached')
    await users.authenticate(basic('shop-1', 'wrong-1'))
    await users.authenticate(basic('shop-1', 'wrong-2'))
    await users.replace([
      { username: 'shop-1', password: await hashPassword('rotated', CHEAP), entities: ['default', 'eu-tokens'] },
      { username: 'new', password: await hashPassword('n3w', CHEAP), entities: [] },
    ])
    t.equal(users.size, 2)
    t.equal(await users.authenticate(zoe), ACCESS_DENIED, 'removed: refused although its check was cached')
    t.ok(isPrincipal(await users.authenticate(basic('new', 'n3w'))), 'added')
    const old = users.authenticate(shop)
    t.ok(old instanceof Promise, 'changed password: the cached check is gone')
    t.equal(await old, ACCESS_DENIED, 'and the old password is refused')
    t.ok(
      isPrincipal(await users.authenticate(basic('shop-1', 'rotated'))),
      'a changed user starts with no failures: the third is not counted against the new password',
    )
    t.ok(isPrincipal(zoePrincipal as Principal))
  },
)

t.test('replace: an unchanged user keeps its failures; an added or changed one starts with none', async (t) => {
  const shopHash = await hashPassword('s3cret', CHEAP)
  const zoeHash = await hashPassword('pässword', CHEAP)
  const users = new CredentialStore(
    [
      { username: 'shop-1', password: shopHash, entities: ['default'] },
      { username: 'zoë', password: zoeHash, entities: ['marketplace'] },
    ],
    { maxFailures: 2 },
  )
  for (const name of ['shop-1', 'zoë', 'later'])
    for (const wrong of ['w1', 'w2']) await users.authenticate(basic(name, wrong))
  for (const name of ['shop-1', 'zoë', 'later'])
    t.equal(users.authenticate(basic(name, 'any')), ACCESS_DENIED, `${name} locked`)
  await users.replace([
    { username: 'shop-1', password: shopHash, entities: ['default'] },
    { username: 'zoë', password: await hashPassword('pässword', CHEAP), entities: ['marketplace'] },
    { username: 'later', password: await hashPassword('l8r', CHEAP), entities: [] },
  ])
  t.equal(users.authenticate(basic('shop-1', 's3cret')), ACCESS_DENIED, 'unchanged: still locked')
  t.ok(isPrincipal(await users.authenticate(basic('zoë', 'pässword'))), 'a new hash: unlocked')
  t.ok(isPrincipal(await users.authenticate(basic('later', 'l8r'))), 'added: unlocked')
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
  await users.replace([
    { username: 'zoë', password: zoeHash, entities: ['marketplace', 'default'] },
    { username: 'shop-1', password: shopHash, entities: ['default'] },
  ])
  t.equal(users.authenticate(basic('shop-1', 's3cret')), shop, 'the same principal, answered from the cache')
  const zoe = users.authenticate(basic('zoë', 'pässword'))
  t.ok(zoe instanceof Promise, 'entities changed: checked again')
  t.same([...((await zoe) as Principal).entities], ['marketplace', 'default'])
  await users.replace([{ username: 'zoë', password: zoeHash, entities: ['marketplace', 'eu-tokens'] }])
  t.ok(users.authenticate(basic('zoë', 'pässword')) instanceof Promise, 'as many entities, other ones: checked again')
})

t.test('replace: a refused list changes nothing', async (t) => {
  const users = await store()
  const hash = await hashPassword('x', CHEAP)
  t.throws(
    () =>
      users.replace([
        { username: 'a', password: hash, entities: [] },
        { username: 'a', password: hash, entities: [] },
      ]),
    { code: 'ECREDENTIALS', message: /listed twice/ },
  )
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
  // A few turns of the microtask queue, never the event loop: each check has had its turn, taken its user and
  // started hashing (on the thread pool), and no hash can have ended.
  for (let turn = 0; turn < 10; turn++) await Promise.resolve()
  await users.replace([{ username: 'shop-1', password: rotated, entities: ['default'] }])
  t.equal(
    await old,
    ACCESS_DENIED,
    'the old password, checked against the old hash, is refused once the new one is in force',
  )
  t.ok(isPrincipal(await renewed), 'the new password, started before the switch, is accepted')
  t.equal(await gone, ACCESS_DENIED)
  t.notOk(users.authenticate(basic('shop-1', 'rotated')) instanceof Promise, 'and cached')
})

t.test(
  'hashes are bounded: beyond the queue, 503 at once with Retry-After, known and unknown usernames alike',
  async (t) => {
    const users = await store({ hashConcurrency: 1, hashQueueMax: 2, maxFailures: 2 })
    const admitted = [basic('shop-1', 'wrong'), basic('nobody', 'x'), basic('zoë', 'nope')].map((header) =>
      users.authenticate(header),
    )
    t.ok(
      admitted.every((check) => check instanceof Promise),
      'one hashing, two waiting',
    )
    t.same(users.hashing, { running: 1, waiting: 2 })
    for (const header of [basic('ghost', 'x'), basic('shop-1', 's3cret'), basic('ghost', 'y'), basic('ghost', 'z')])
      t.equal(users.authenticate(header), HASHING_IS_BUSY, 'refused at once, known user or not')
    t.equal(HASHING_IS_BUSY.status, 503)
    t.equal(HASHING_IS_BUSY.body.errorName, 'serviceUnavailable')
    t.equal(
      HASHING_IS_BUSY.body.message,
      'Too many logins are being verified. Retry after the time given in Retry-After.',
    )
    t.equal(HASHING_IS_BUSY.headers?.['Retry-After'], '1')
    t.same(await Promise.all(admitted), [ACCESS_DENIED, ACCESS_DENIED, ACCESS_DENIED])
    t.same(users.hashing, { running: 0, waiting: 0 })
    t.ok(users.authenticate(basic('ghost', 'x')) instanceof Promise, 'a refusal for want of room is not a failure')
    t.ok(isPrincipal(await users.authenticate(basic('shop-1', 's3cret'))))
  },
)

t.test(
  '150 made-up usernames in flight from one client: a real first login from another is not queued behind them',
  async (t) => {
    // One hash at a time, so that the order of turns is exact: the flood's first, then each address in turn.
    const users = await store({ hashConcurrency: 1 })
    let settled = 0
    const flood = Array.from({ length: 150 }, (_, i) => users.authenticate(basic(`made-up-${i}`, 'x'), '203.0.113.7'))
    const running = flood.filter((check) => check instanceof Promise)
    for (const check of running) void (check as Promise<unknown>).then(() => settled++)
    t.equal(running.length, 1 + 8, 'one hashing and the 8 waiting places one client may hold')
    t.ok(
      flood.every((check) => check instanceof Promise || check === HASHING_IS_BUSY),
      'the other 141 answered 503 at once',
    )
    const real = users.authenticate(basic('shop-1', 's3cret'), '198.51.100.1')
    t.ok(real instanceof Promise, 'the real login is admitted')
    t.ok(isPrincipal(await real))
    t.equal(settled, 2, 'served after the one hashing and one more of the flood: the turns alternate by address')
    t.ok(users.hashing.waiting > 0, 'while the flood still waits')
    await Promise.all(running)
  },
)

t.test('without a client address, a flood fills the shared queue and every further check is 503 at once', async (t) => {
  const users = await store({ hashConcurrency: 1 })
  const flood = Array.from({ length: 150 }, (_, i) => users.authenticate(basic(`made-up-${i}`, 'x')))
  const running = flood.filter((check) => check instanceof Promise)
  t.equal(running.length, 1 + 32, 'one hashing, the 32 waiting places')
  t.equal(
    users.authenticate(basic('shop-1', 's3cret')),
    HASHING_IS_BUSY,
    'a real login is told to retry, not made to wait',
  )
  await Promise.all(running)
  t.ok(isPrincipal(await users.authenticate(basic('shop-1', 's3cret'))))
})

t.test('failures from one client address lock that address, not the others; cached checks keep working', async (t) => {
  const users = await store({ addressMaxFailures: 3 })
  const attacker = '203.0.113.7'
  const shop = basic('shop-1', 's3cret')
  const cached = await users.authenticate(shop, attacker)
  t.ok(isPrincipal(cached))
  t.ok(isPrincipal(await users.authenticate(basic('zoë', 'pässword'), attacker)), 'a success forgives nothing')
  for (const name of ['a', 'b', 'c']) t.equal(await users.authenticate(basic(name, 'x'), attacker), ACCESS_DENIED)
  t.equal(users.authenticate(basic('d', 'x'), attacker), ACCESS_DENIED, 'locked: refused without hashing')
  t.equal(
    users.authenticate(`basic ${basic('zoë', 'pässword').slice(6)}`, attacker),
    users.authenticate(basic('zoë', 'pässword')),
    'a cached check is answered whatever the address',
  )
  t.equal(users.authenticate(shop, attacker), cached, 'the cached check still answers from the locked address')
  const other = users.authenticate(basic('d', 'x'), '198.51.100.1')
  t.ok(other instanceof Promise, 'another address is still heard')
  t.equal(await other, ACCESS_DENIED)
})

/** A hash string of that cost that nothing matches: parsed and bounded at load, never hashed by these tests. */
const unmatchable = (N: number, r: number, p = 1) => `scrypt$${N}$${r}$${p}$${'A'.repeat(22)}==$${'A'.repeat(43)}=`
const MiB = 1024 * 1024

t.test(
  'an unknown username is hashed at the cost of the users in force, not the default one: under a memory bound only their cost fits, it is refused as a wrong password is',
  async (t) => {
    // TEST_COST takes 1 MiB a hash; the default cost, 16 MiB, would be over this bound.
    const users = new CredentialStore(
      [{ username: 'shop-1', password: await hashPassword('s3cret', CHEAP), entities: ['default'] }],
      { hashMemoryMax: 4 * MiB },
    )
    t.equal(await users.authenticate(basic('nobody', 's3cret')), ACCESS_DENIED)
    t.equal(await users.authenticate(basic('shop-1', 'wrong')), ACCESS_DENIED)
    t.ok(isPrincipal(await users.authenticate(basic('shop-1', 's3cret'))))
  },
)

t.test('a cost whose hashes at once would pass hashMemoryMax is refused at load, and at a reload', async (t) => {
  const user = (N: number, r: number) => [{ username: 'big', password: unmatchable(N, r), entities: [] }]
  t.throws(() => new CredentialStore(user(65536, 8)), {
    code: 'ECREDENTIALS',
    message:
      'user "big": scrypt N=65536, r=8 takes 64 MiB a hash, 256 MiB for the 4 that may run at once, above ' +
      'hashMemoryMax (128 MiB): hash its password again with payments-gate hash-password, or see docs/credentials.md for the bound',
  })
  t.equal(new CredentialStore(user(32768, 8)).size, 1, 'four hashes of 32 MiB: the default bound to the byte')
  t.throws(() => new CredentialStore(user(16384, 8), { hashMemoryMax: 64 * MiB - 1 }), {
    message: /takes 16 MiB a hash, 64 MiB for the 4 that may run at once, above hashMemoryMax \(64 MiB\)/,
  })
  t.equal(new CredentialStore(user(16384, 8), { hashMemoryMax: 64 * MiB }).size, 1)
  t.equal(new CredentialStore(user(16384, 8), { hashMemoryMax: 32 * MiB, hashConcurrency: 2 }).size, 1)
  t.throws(() => new CredentialStore(user(16384, 8), { hashMemoryMax: 32 * MiB, hashConcurrency: 3 }), {
    message: /takes 16 MiB a hash, 48 MiB for the 3 that may run at once, above hashMemoryMax \(32 MiB\)/,
  })
  t.throws(() => new CredentialStore(user(2048, 3), { hashMemoryMax: MiB }), {
    message:
      /^user "big": scrypt N=2048, r=3 takes 0\.75 MiB a hash, 3 MiB for the 4 that may run at once, above hashMemoryMax \(1 MiB\)/,
  })
  const users = await store()
  t.throws(() => users.replace(user(65536, 8)), { code: 'ECREDENTIALS', message: /^user "big": scrypt N=65536/ })
  t.equal(users.size, 2, 'refused: the users in force stay')
  t.ok(isPrincipal(await users.authenticate(basic('shop-1', 's3cret'))))
})

/** A wait the test ends: each pad a check asks for, in order, and the means to end it. */
function pads(): { asked: { ms: number; end: () => void }[]; wait: (ms: number) => Promise<void> } {
  const asked: { ms: number; end: () => void }[] = []
  return { asked, wait: (ms) => new Promise((resolve) => void asked.push({ ms, end: resolve })) }
}

/**
 * The clock moves by `ms` while a check's hash runs: a few turns of the microtask queue, never the event loop, give
 * the check its turn and start its hash on the thread pool, and no hash can end before the loop turns.
 */
async function hashTakes(time: { advance: (ms: number) => void }, ms: number): Promise<void> {
  for (let turn = 0; turn < 10; turn++) await Promise.resolve()
  time.advance(ms)
}

/** Users at two costs: `cheap` at scrypt's smallest, `dear` at TEST_COST, 512 times its work. */
async function mixed(options: CredentialStoreOptions): Promise<CredentialStore> {
  return new CredentialStore(
    [
      { username: 'cheap', password: await hashPassword('c', { N: 16, r: 1, p: 1 }), entities: ['default'] },
      { username: 'dear', password: await hashPassword('d', CHEAP), entities: ['default'] },
    ],
    options,
  )
}

t.test(
  'a failure lasts what the dearest cost takes: an unknown username is hashed at it and waits for nothing more; a cheaper user waits the rest, holding its turn',
  async (t) => {
    const time = clock()
    const pad = pads()
    const users = await mixed({ now: time.now, wait: pad.wait })

    const ghost = users.authenticate(basic('ghost', 'x'))
    await hashTakes(time, 330)
    t.equal(await ghost, ACCESS_DENIED)
    t.same(pad.asked, [], 'hashed at the dearest cost: its own hash is the time to take')

    let answered = false
    const cheap = users.authenticate(basic('cheap', 'wrong'))
    void (cheap as Promise<unknown>).then(() => (answered = true))
    await hashTakes(time, 63)
    t.ok(await until(() => pad.asked.length === 1), 'its hash done, it waits')
    t.same(
      pad.asked.map(({ ms }) => ms),
      [330 - 63],
      'the rest of the time the dearest cost took, measured by the unknown username',
    )
    for (let loop = 0; loop < 3; loop++) await new Promise(setImmediate)
    t.notOk(answered, 'no answer before the pad ends')
    t.same(users.hashing, { running: 1, waiting: 0 }, 'the turn is held while it waits: it lasts as long as any')
    ;(pad.asked[0] as { end: () => void }).end()
    t.equal(await cheap, ACCESS_DENIED)
    t.same(users.hashing, { running: 0, waiting: 0 })

    const dear = users.authenticate(basic('dear', 'wrong'))
    await hashTakes(time, 300)
    t.equal(await dear, ACCESS_DENIED)
    t.equal(pad.asked.length, 1, 'a user at the dearest cost waits for nothing more either')
    const again = users.authenticate(basic('cheap', 'wrong again'))
    await hashTakes(time, 50)
    t.ok(await until(() => pad.asked.length === 2))
    t.equal(pad.asked[1]?.ms, 300 - 50, 'the last hash measured at the dearest cost sets the time, whoever ran it')
    pad.asked[1]?.end()
    t.equal(await again, ACCESS_DENIED)

    const right = users.authenticate(basic('cheap', 'c'))
    await hashTakes(time, 10)
    t.ok(isPrincipal(await right), 'a success waits for nothing')
    const slow = users.authenticate(basic('cheap', 'slow'))
    await hashTakes(time, 400)
    t.equal(await slow, ACCESS_DENIED)
    t.equal(pad.asked.length, 2, 'a cheaper hash that took longer than the dearest one waits for nothing')
  },
)

t.test(
  'before a hash at the dearest cost was measured, a cheaper failure lasts its own hash scaled by the two costs’ work; a reload to another dearest cost forgets the time measured',
  async (t) => {
    const time = clock()
    const pad = pads()
    const users = await mixed({ now: time.now, wait: pad.wait })
    const cheap = users.authenticate(basic('cheap', 'wrong'))
    await hashTakes(time, 2)
    t.ok(await until(() => pad.asked.length === 1))
    t.equal(pad.asked[0]?.ms, 2 * 512 - 2, 'N*r*p: 8192 against 16')
    pad.asked[0]?.end()
    t.equal(await cheap, ACCESS_DENIED)

    const measure = users.authenticate(basic('ghost', 'x'))
    await hashTakes(time, 330)
    await measure
    const cheapHash = await hashPassword('c', { N: 16, r: 1, p: 1 })
    const dearHash = await hashPassword('d', CHEAP)
    // The same users in another order, and a third at a cost between: the dearest cost and its time stay.
    await users.replace([
      { username: 'dear', password: dearHash, entities: ['default'] },
      { username: 'middle', password: await hashPassword('m', { N: 64, r: 1, p: 1 }), entities: [] },
      { username: 'cheap', password: cheapHash, entities: ['default'] },
    ])
    const kept = users.authenticate(basic('middle', 'wrong'))
    await hashTakes(time, 30)
    t.ok(await until(() => pad.asked.length === 2))
    t.equal(pad.asked[1]?.ms, 300, 'the dearest cost is the same: its time is kept')
    pad.asked[1]?.end()
    await kept

    await users.replace([
      { username: 'cheap', password: cheapHash, entities: ['default'] },
      { username: 'dearer', password: await hashPassword('e', { N: 2048, r: 8, p: 1 }), entities: [] },
    ])
    const estimated = users.authenticate(basic('cheap', 'wrong'))
    await hashTakes(time, 1)
    t.ok(await until(() => pad.asked.length === 3))
    t.equal(pad.asked[2]?.ms, 1024 - 1, 'another dearest cost: estimated again, the old time forgotten')
    pad.asked[2]?.end()
    await estimated
  },
)

t.test('of costs of equal work, the first listed is the dearest, whatever p', async (t) => {
  const time = clock()
  const pad = pads()
  const users = new CredentialStore(
    [
      { username: 'wide', password: await hashPassword('w', { N: 64, r: 1, p: 1 }), entities: [] },
      { username: 'parallel', password: await hashPassword('p', { N: 32, r: 1, p: 2 }), entities: [] },
    ],
    { now: time.now, wait: pad.wait },
  )
  const ghost = users.authenticate(basic('ghost', 'x'))
  await hashTakes(time, 100)
  await ghost
  const parallel = users.authenticate(basic('parallel', 'wrong'))
  await hashTakes(time, 40)
  t.ok(await until(() => pad.asked.length === 1))
  t.equal(pad.asked[0]?.ms, 60, 'padded to the first cost’s time, measured by the unknown username')
  pad.asked[0]?.end()
  await parallel
  const wide = users.authenticate(basic('wide', 'wrong'))
  await hashTakes(time, 90)
  await wide
  t.equal(pad.asked.length, 1, 'the first cost is the dearest one: no pad')
})

t.test('a failure at a cheaper cost, on the real clock, is answered once its pad ends', async (t) => {
  // Costs whose work differs twice, not mixed()'s 512 times: the pad, that many of the cheap hash, is a few ms here.
  const users = new CredentialStore([
    { username: 'cheap', password: await hashPassword('c', { N: 16, r: 1, p: 1 }), entities: ['default'] },
    { username: 'dear', password: await hashPassword('d', { N: 32, r: 1, p: 1 }), entities: ['default'] },
  ])
  t.equal(await users.authenticate(basic('cheap', 'wrong')), ACCESS_DENIED)
  t.same(users.hashing, { running: 0, waiting: 0 })
})

t.test('costs that differ in p alone, or r alone, are other costs, and each counts in the work', async (t) => {
  const time = clock()
  const pad = pads()
  const byP = new CredentialStore(
    [
      { username: 'one', password: await hashPassword('1', { N: 16, r: 1, p: 1 }), entities: [] },
      { username: 'two', password: await hashPassword('2', { N: 16, r: 1, p: 2 }), entities: [] },
    ],
    { now: time.now, wait: pad.wait },
  )
  const ghost = byP.authenticate(basic('ghost', 'x'))
  await hashTakes(time, 100)
  await ghost
  t.same(pad.asked, [], 'hashed at p=2, the dearer')
  const one = byP.authenticate(basic('one', 'wrong'))
  await hashTakes(time, 30)
  t.ok(await until(() => pad.asked.length === 1))
  t.equal(pad.asked[0]?.ms, 70, 'p=1 is cheaper: padded')
  pad.asked[0]?.end()
  await one
  const byR = new CredentialStore(
    [
      { username: 'one', password: await hashPassword('1', { N: 16, r: 1, p: 1 }), entities: [] },
      { username: 'two', password: await hashPassword('2', { N: 16, r: 2, p: 1 }), entities: [] },
    ],
    { now: time.now, wait: pad.wait },
  )
  const cheaper = byR.authenticate(basic('one', 'wrong'))
  await hashTakes(time, 3)
  t.ok(await until(() => pad.asked.length === 2))
  t.equal(pad.asked[1]?.ms, 3, 'r=2 is twice the work: estimated at twice the time')
  pad.asked[1]?.end()
  await cheaper
})

t.test('replace: entities taken away are a new principal too, checked again', async (t) => {
  const hash = await hashPassword('s3cret', CHEAP)
  const users = new CredentialStore([{ username: 'shop-1', password: hash, entities: ['default', 'eu-tokens'] }])
  await users.authenticate(basic('shop-1', 's3cret'))
  await users.replace([{ username: 'shop-1', password: hash, entities: ['default'] }])
  const narrowed = users.authenticate(basic('shop-1', 's3cret'))
  t.ok(narrowed instanceof Promise, 'not answered from the cache')
  t.same([...((await narrowed) as Principal).entities], ['default'])
})

t.test('replace clears the throttle of the users it added or changed, and of no one else', async (t) => {
  const memory = new MemoryLoginThrottle()
  const cleared: string[] = []
  const throttle = {
    admit: (username: string) => memory.admit(username),
    clear: (username: string) => void cleared.push(username),
  }
  const hash = await hashPassword('s3cret', CHEAP)
  const users = new CredentialStore(
    [
      { username: 'kept', password: hash, entities: ['default'] },
      { username: 'changed', password: hash, entities: ['default'] },
    ],
    { throttle },
  )
  await users.replace([
    { username: 'kept', password: hash, entities: ['default'] },
    { username: 'changed', password: hash, entities: ['eu-tokens'] },
    { username: 'added', password: hash, entities: [] },
  ])
  t.same(cleared, ['changed', 'added'])
})

t.test('without a client address nothing is counted per address', async (t) => {
  const users = await store({ addressMaxFailures: 2 })
  for (const name of ['a', 'b', 'c']) {
    const answer = users.authenticate(basic(name, 'x'))
    t.ok(answer instanceof Promise, `${name}: verified, no address locked`)
    t.equal(await answer, ACCESS_DENIED)
  }
})

t.test('a throttle that answers later: its refusal is 401, even for the right password', async (t) => {
  const memory = new MemoryLoginThrottle({ maxFailures: 1 })
  const users = await store({
    throttle: { admit: async (username: string) => memory.admit(username), clear: () => {} },
  })
  t.equal(await users.authenticate(basic('shop-1', 'wrong')), ACCESS_DENIED)
  const refused = users.authenticate(basic('shop-1', 's3cret'))
  t.ok(refused instanceof Promise, 'a promise: the throttle answers later')
  t.equal(await refused, ACCESS_DENIED, 'locked: even the right password')
})

t.test('a refusal by a throttle that answers later is no failure of the client address', async (t) => {
  const memory = new MemoryLoginThrottle({ maxFailures: 1 })
  const users = await store({
    addressMaxFailures: 2,
    throttle: { admit: async (username: string) => memory.admit(username), clear: () => {} },
  })
  const address = '203.0.113.7'
  t.equal(await users.authenticate(basic('shop-1', 'wrong'), address), ACCESS_DENIED, 'one failure of the address')
  for (const guess of ['x', 'y']) t.equal(await users.authenticate(basic('shop-1', guess), address), ACCESS_DENIED)
  t.ok(isPrincipal(await users.authenticate(basic('zoë', 'pässword'), address)), 'the address is not locked')
})
