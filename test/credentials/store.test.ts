import t from 'tap'
import { ACCESS_DENIED, type Principal } from '../../lib/checks/auth.js'
import { hashPassword } from '../../lib/credentials/hash.js'
import { CredentialStore, type CredentialStoreOptions } from '../../lib/credentials/store.js'
import { basic, isPrincipal, TEST_COST as CHEAP } from '../helpers/fixtures.js'

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
    t.equal(
      users.authenticate(basic('shop-1', 'rotated')),
      ACCESS_DENIED,
      'the throttle kept its counts: that third failure locked the user',
    )
    t.ok(isPrincipal(zoePrincipal as Principal))
  },
)

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
  // One turn of the microtask queue: each check has taken its user and started hashing (on the thread pool).
  await Promise.resolve()
  users.replace([{ username: 'shop-1', password: rotated, entities: ['default'] }])
  t.equal(
    await old,
    ACCESS_DENIED,
    'the old password, checked against the old hash, is refused once the new one is in force',
  )
  t.ok(isPrincipal(await renewed), 'the new password, started before the switch, is accepted')
  t.equal(await gone, ACCESS_DENIED)
  t.notOk(users.authenticate(basic('shop-1', 'rotated')) instanceof Promise, 'and cached')
})
