import t from 'tap'
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { parseAllDocuments } from 'yaml'
import { hashPassword, scryptMemory } from '../../lib/credentials/hash.js'
import { loadCredentials, parseCredentials } from '../../lib/credentials/load.js'
import { CREDENTIAL_DEFAULTS, SCRYPT_DEFAULTS } from '../../lib/defaults.js'
import { basic, isPrincipal, TEST_COST as CHEAP } from '../helpers/fixtures.js'

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
    'empty.json': JSON.stringify({ users: [] }),
    // Four hashes of 64 MiB at once: over the default bound of 128 MiB.
    'dear.json': JSON.stringify({
      users: [{ ...user, password: `scrypt$65536$8$1$${'A'.repeat(22)}==$${'A'.repeat(43)}=` }],
    }),
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
    ['empty.json', /empty\.json: no users \(to refuse everybody, see docs\/credentials\.md\)$/],
    ['dear.json', /dear\.json: user "shop-1": scrypt N=65536, r=8 takes 64 MiB a hash, 256 MiB for the 4 that may/],
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
  const dir = t.testdir({
    'clear.json': JSON.stringify({ users: [{ username: 'u', password: 'hunter2', entities: [] }] }),
  })
  await t.rejects(loadCredentials(join(dir, 'clear.json')), { message: /^(?!.*hunter2)/ })
  await writeFile(join(dir, 'clear.json'), '{}')
  await t.rejects(loadCredentials(join(dir, 'clear.json')), { code: 'ECREDENTIALS', message: /\$\.users: / })
})

t.test('a name given twice in one object is refused: a reader of the file would see other users', async (t) => {
  const user = (name: string) => `{"username":"${name}","password":"scrypt$x","entities":["default"]}`
  // Red before: the second list of users was the one in force, the first the one a reviewer reads.
  t.throws(() => parseCredentials(`{"users":[${user('shop-1')}],"users":[${user('intruder')}]}`), {
    code: 'ECREDENTIALS',
    message:
      '$.users: given twice in one object, where the gateway would read the last and a reader of the file the first; give it once',
  })
  t.throws(() => parseCredentials(`{"users":[{"username":"a","username":"b","password":"scrypt$x","entities":[]}]}`), {
    message: /^\$\.users\[0\]\.username: given twice/,
  })
})

t.test('a file that is not JSON is refused without quoting it: it holds password hashes', async (t) => {
  for (const text of ['alice:scrypt$secret-hash', '{"users":[{"username":"a","password":"scrypt$secret-hash" x}]}'])
    t.throws(() => parseCredentials(text), { code: 'ECREDENTIALS', message: /^not JSON: (?!.*secret-hash)/ }, text)
  t.throws(() => parseCredentials('{"users":'), { message: 'not JSON: Unexpected end of JSON input' }, 'no text: kept')
})

t.test(
  "the default bound on hashing memory: the default cost fits it, and it is at most half the gateway container's memory limit in deploy/payments.yaml",
  async (t) => {
    const manifests = parseAllDocuments(await readFile(new URL('../../deploy/payments.yaml', import.meta.url), 'utf8'))
    const deployment = manifests.map((document) => document.toJS()).find((object) => object.kind === 'Deployment')
    const gateway = deployment.spec.template.spec.containers.find(
      (container: { name: string }) => container.name === 'payments-gate',
    )
    const limit = /^(\d+)Mi$/.exec(gateway.resources.limits.memory)
    t.ok(limit, gateway.resources.limits.memory)
    t.ok(CREDENTIAL_DEFAULTS.hashMemoryMax <= (Number(limit?.[1]) * 1048576) / 2, 'half the pod for the rest of node')
    t.ok(
      scryptMemory(SCRYPT_DEFAULTS) * CREDENTIAL_DEFAULTS.hashConcurrency <= CREDENTIAL_DEFAULTS.hashMemoryMax,
      'the hashes hash-password makes are accepted',
    )
  },
)
