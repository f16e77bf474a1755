import t from 'tap'
import { rename, symlink, unlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { hashPassword } from '../../lib/credentials/hash.js'
import type { CredentialStore } from '../../lib/credentials/store.js'
import { watchCredentials, type WatchCredentialsOptions } from '../../lib/credentials/watch.js'
import type { ReloadOutcome } from '../../lib/watch.js'
import { basic, isPrincipal, TEST_COST as CHEAP } from '../helpers/fixtures.js'
import { until } from '../helpers/wait.js'

async function credentialsText(users: Record<string, string>): Promise<string> {
  const list = await Promise.all(
    Object.entries(users).map(async ([username, password]) => ({
      username,
      password: await hashPassword(password, CHEAP),
      entities: ['default'],
    })),
  )
  return JSON.stringify({ users: list })
}

function watching() {
  const outcomes: ReloadOutcome[] = []
  /** How many reads of the file ended: one that found nothing new reports nothing else. */
  const reads = { count: 0 }
  const lines: { level: string; fields: Record<string, unknown>; message: string }[] = []
  const logger = {
    info: (fields: Record<string, unknown>, message: string) => void lines.push({ level: 'info', fields, message }),
    warn: (fields: Record<string, unknown>, message: string) => void lines.push({ level: 'warn', fields, message }),
  } as unknown as NonNullable<WatchCredentialsOptions['logger']>
  return {
    outcomes,
    lines,
    reads,
    options: {
      logger,
      onReload: (outcome: ReloadOutcome) => void outcomes.push(outcome),
      onRead: () => void reads.count++,
      debounceMs: 10,
    },
  }
}

const accepts = async (users: { authenticate: CredentialStore['authenticate'] }, username: string, password: string) =>
  isPrincipal(await users.authenticate(basic(username, password)))

t.test(
  'watchCredentials: a changed file takes effect without a restart; a refused one keeps the last good users, reported once',
  async (t) => {
    const dir = t.testdir({ 'credentials.json': await credentialsText({ 'shop-1': 'old', other: 'same' }) })
    const file = join(dir, 'credentials.json')
    const log = watching()
    const users = await watchCredentials(file, log.options)
    t.teardown(() => users.close())
    t.equal(users.size, 2)
    t.ok(await accepts(users, 'shop-1', 'old'))
    await writeFile(file, await credentialsText({ 'shop-1': 'new', other: 'same' }))
    t.ok(await until(() => accepts(users, 'shop-1', 'new')), 'the new password is let in')
    t.notOk(await accepts(users, 'shop-1', 'old'), 'the old password is refused')
    t.same(log.outcomes, [{ applied: true, refused: [], refusedNow: 0 }])
    t.match(log.lines, [{ level: 'info', fields: { file, users: 2 }, message: 'credentials reloaded' }])

    await writeFile(file, '{"users": [')
    t.ok(await until(() => log.outcomes.length === 2))
    t.match(log.outcomes[1], { applied: false, refused: [{ file, reason: /^not JSON: / }], refusedNow: 1 })
    // The read that reported it has ended: the next one, a re-scan, reads the same refused version.
    const seen = log.reads.count
    t.ok(await until(() => log.reads.count > seen), 'read again')
    t.equal(log.outcomes.length, 2, 'the re-scans found the same refused version: nothing more reported')
    t.equal(log.lines.filter((line) => line.level === 'warn').length, 1, 'logged once')
    t.ok(await accepts(users, 'shop-1', 'new'), 'the last good users stay in force')
    await unlink(file)
    t.ok(await until(() => log.outcomes.length === 3))
    t.match(log.outcomes[2], { applied: false, refused: [{ file, reason: 'no such file or folder' }], refusedNow: 1 })
    t.ok(await accepts(users, 'other', 'same'))

    // Back to the version in force: nothing changes, but the file is no longer refused.
    await writeFile(file, await credentialsText({ 'shop-1': 'new', other: 'same' }))
    t.ok(await until(() => log.outcomes.length === 4))
    t.same(
      log.outcomes[3],
      { applied: true, refused: [], refusedNow: 0 },
      'another text with the same users is a new version applied',
    )
  },
)

t.test(
  'watchCredentials: back to the very text in force after a refused version reports that nothing is refused',
  async (t) => {
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
  },
)

t.test('watchCredentials: re-reads that find the file as it was report nothing', async (t) => {
  const dir = t.testdir({ 'credentials.json': await credentialsText({ u: 'pw' }) })
  const log = watching()
  const users = await watchCredentials(join(dir, 'credentials.json'), { ...log.options, rescanMs: 10 })
  t.teardown(() => users.close())
  t.ok(await until(() => log.reads.count >= 3), 're-read three times')
  t.same(log.outcomes, [])
  t.same(log.lines, [])
})

t.test("watchCredentials: an editor's rename and a Kubernetes Secret's ..data swap are both picked up", async (t) => {
  const dir = t.testdir({ 'credentials.json': await credentialsText({ u: 'one' }) })
  const users = await watchCredentials(join(dir, 'credentials.json'), { debounceMs: 10 })
  t.teardown(() => users.close())
  await writeFile(join(dir, '.credentials.json.tmp'), await credentialsText({ u: 'two' }))
  await rename(join(dir, '.credentials.json.tmp'), join(dir, 'credentials.json'))
  t.ok(await until(() => accepts(users, 'u', 'two')), 'the renamed file is read')

  // A Secret is mounted as files that link through `..data` to a versioned folder, swapped by a rename.
  const root = t.testdir({
    v1: { 'credentials.json': await credentialsText({ k: 'v1' }) },
    v2: { 'credentials.json': await credentialsText({ k: 'v2' }) },
  })
  await symlink('v1', join(root, '..data'))
  await symlink(join('..data', 'credentials.json'), join(root, 'credentials.json'))
  const mounted = await watchCredentials(join(root, 'credentials.json'), { debounceMs: 10 })
  t.teardown(() => mounted.close())
  t.ok(await accepts(mounted, 'k', 'v1'))
  await symlink('v2', join(root, '..data_tmp'))
  await rename(join(root, '..data_tmp'), join(root, '..data'))
  t.ok(await until(() => accepts(mounted, 'k', 'v2')), 'the swapped version is read')
  t.notOk(await accepts(mounted, 'k', 'v1'))
})

t.test(
  'watchCredentials: a bad file at start is an ECREDENTIALS error naming it; without a logger or listener a reload is quiet',
  async (t) => {
    const dir = t.testdir({ 'bad.json': '{"users": 1}', 'good.json': await credentialsText({ a: 'b' }) })
    await t.rejects(watchCredentials(join(dir, 'bad.json')), {
      code: 'ECREDENTIALS',
      message: /bad\.json: \$\.users: /,
    })
    await t.rejects(watchCredentials(join(dir, 'missing.json')), {
      code: 'ECREDENTIALS',
      message: /missing\.json: no such file or folder/,
    })
    const users = await watchCredentials(join(dir, 'good.json'), { rescanMs: 60_000 })
    await users.reload()
    await writeFile(join(dir, 'good.json'), '[]')
    await users.reload()
    t.ok(await accepts(users, 'a', 'b'))
    users.close()
  },
)

t.test('watchCredentials: a file emptied of users is refused, its last good users stay in force', async (t) => {
  const dir = t.testdir({ 'credentials.json': await credentialsText({ 'shop-1': 's3cret' }) })
  const file = join(dir, 'credentials.json')
  const log = watching()
  const users = await watchCredentials(file, log.options)
  t.teardown(() => users.close())
  await writeFile(file, JSON.stringify({ users: [] }))
  await users.reload()
  t.equal(users.size, 1)
  t.ok(await accepts(users, 'shop-1', 's3cret'), 'still let in')
  t.match(log.outcomes.at(-1), { applied: false, refused: [{ file, reason: /^no users/ }], refusedNow: 1 })
  t.match(log.lines.at(-1), { level: 'warn', message: 'credentials file refused, its last good users stay in force' })
})

t.test('watchCredentials: the caller-given client address reaches the store', async (t) => {
  const dir = t.testdir({ 'credentials.json': await credentialsText({ 'shop-1': 's3cret' }) })
  const users = await watchCredentials(join(dir, 'credentials.json'), { ...watching().options, addressMaxFailures: 1 })
  t.teardown(() => users.close())
  t.notOk(isPrincipal(await users.authenticate(basic('shop-1', 'wrong'), '203.0.113.7')))
  t.notOk(isPrincipal(await users.authenticate(basic('shop-1', 's3cret'), '203.0.113.7')), 'that address is locked')
  t.ok(isPrincipal(await users.authenticate(basic('shop-1', 's3cret'), '198.51.100.1')), 'another is not')
})
