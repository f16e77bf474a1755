// A URL, or what was meant as one, never shows a password: not in `serve`'s start-up error, not in its logs,
// not in the errors of createGateway's `idempotency` and createGate's `throttleRedis`, whatever its slashes.
import { join } from 'node:path'
import fc from 'fast-check'
import t from 'tap'
import { createGate } from '../lib/gate.js'
import { checkIdempotencySpec } from '../lib/idempotency/create-store.js'
import { createRedisClient, redisTarget } from '../lib/idempotency/redis-client.js'
import { createGateway } from '../lib/proxy/server.js'
import { hideUserinfo, shownUrl } from '../lib/shown-url.js'
import { runCliOnce, spawnCli, type CliResult } from './helpers/cli.js'
import { FINGERPRINT_KEY, POLICIES_DIR, testCredentials, writeFingerprintKey } from './helpers/fixtures.js'
import { runs } from './helpers/fuzz.js'
import { captureLogger, TEST_REDIS_PASSWORD } from './helpers/logs.js'

t.test('hideUserinfo: what comes before the last @ and from the first ? on, whatever the slashes', async (t) => {
  const cases: [string, string][] = [
    ['redis://:secret@h:6379', 'redis://***@h:6379'],
    ['https://u:p@ss@host/x', 'https://***@host/x'],
    ['redis://:pass/word@host:6379', 'redis://***@host:6379'],
    // The mistypes: one slash, a backslash, none.
    ['redis:/:PW@h', 'redis:***@h'],
    ['https:/u:PW@h', 'https:***@h'],
    ['https:\\\\u:PW@h', 'https:***@h'],
    ['redis:PW@h', 'redis:***@h'],
    ['REDIS:///u:PW@h', 'REDIS://***@h'],
    // Text before a `:` that is not a scheme of ours may be a user name.
    ['u:PW@h', '***@h'],
    ['ftp://u:PW@h', '***@h'],
    ['user@host', '***@host'],
    // A query's options may hold a password, and a `?` before the last `@` a password's own.
    ['redis://h?port=1&password=PW&enableOfflineQueue=false', 'redis://h?***'],
    ['redis://:p?w@h:6379', 'redis://***'],
    ['redis://h?password=a@b', 'redis://***'],
    ['redis://:PW@h:6379/0?x=1', 'redis://***@h:6379/0?***'],
    ['http://host/a@b', 'http://***@b'],
    ['memory', 'memory'],
    ['redis-sentinel://s1:26379,s2/0#primary', 'redis-sentinel://s1:26379,s2/0#primary'],
  ]
  for (const [text, shown] of cases) t.equal(hideUserinfo(text), shown, text)
  t.equal(shownUrl('redis:\\\\:PW@h\n'), '"redis:***@h\\n"', 'quoted as JSON: one line')
})

/** Capitals and digits that none of the messages hold in a row (HOST, PORT, DB, MASTER, URL, FILE are its words). */
const SECRET_CHARS = [...'GJKQVWXYZ23456789']
const run = fc.string({ unit: fc.constantFrom(...SECRET_CHARS), minLength: 3, maxLength: 6 })

/** A password: runs of those characters, joined by what a password may hold that a URL reads otherwise. */
const password = fc
  .tuple(
    run,
    fc.array(fc.tuple(fc.constantFrom('@', '/', '?', '#', ':', '\\', '%', '%4', '&', '=', ' ', '"', ',', '%40'), run), {
      maxLength: 3,
    }),
  )
  .map(([first, rest]) => first + rest.map(([joint, next]) => joint + next).join(''))

/** Every run of the password's own characters: none may be shown, so no part of it is. */
const runsOf = (secret: string): string[] => secret.match(/[GJKQVWXYZ2-9]{3,}/g) ?? []

const scheme = fc.constantFrom(
  'redis',
  'rediss',
  'redis-sentinel',
  'rediss-sentinel',
  'https',
  'http',
  'REDIS',
  'ftp',
  '',
)
const afterScheme = fc.constantFrom(':', ':/', '://', ':///', ':\\', ':\\\\', ':/\\', '//', '/', '', ';//', ': //')
const user = fc.constantFrom('', 'payments-gate', 'u', 'redis', 'https:')
const host = fc.constantFrom('127.0.0.1', 'localhost', '127.0.0.1:1', '127.0.0.1:1,127.0.0.1:2', '', ':1', 'h.invalid')
const tail = fc.constantFrom('', '/0', '/x', '#m', '/0#m', '?db=1', '#m?x=1', '/', '@', '\\0')

/** What was meant as a URL with a password in it: in its userinfo (behind some mistyped slashes) or in a query. */
const mistyped = fc.oneof(
  fc.record({ scheme, afterScheme, user, colon: fc.constantFrom(':', '', '::'), password, host, tail }).map((u) => ({
    secret: u.password,
    url: `${u.scheme}${u.afterScheme}${u.user}${u.colon}${u.password}@${u.host}${u.tail}`,
  })),
  fc.record({ scheme, afterScheme, host, before: fc.constantFrom('', 'port=1&', 'x'), password, tail }).map((q) => ({
    secret: q.password,
    url: `${q.scheme}${q.afterScheme}${q.host}?${q.before}password=${q.password}&enableOfflineQueue=false${q.tail}`,
  })),
)

/** Whether a text shows no part of the secret. */
const hides = (text: string, secret: string): boolean =>
  !text.includes(secret) && runsOf(secret).every((part) => !text.includes(part))

t.test(
  'property: hideUserinfo and shownUrl never show a part of the password, however the URL is mistyped',
  async (t) => {
    fc.assert(
      fc.property(mistyped, ({ url, secret }) => hides(hideUserinfo(url), secret) && hides(shownUrl(url), secret)),
      runs(),
    )
    // The oracle of a real reader: wherever WHATWG's URL parser finds a password, it is hidden.
    fc.assert(
      fc.property(mistyped, ({ url }) => {
        let parsed: URL
        try {
          parsed = new URL(url)
        } catch {
          return true
        }
        const found = [parsed.password, parsed.searchParams.get('password') ?? '']
        return found.every((secret) => secret === '' || hides(hideUserinfo(url), secret))
      }),
      runs(),
    )
    t.pass('no part of any password shown')
  },
)

t.test(
  "property: createGateway's idempotency, createGate's throttleRedis and the store's check refuse such a URL without showing the password",
  async (t) => {
    const credentials = await testCredentials()
    const gate = await createGate({ policies: POLICIES_DIR, credentials })
    t.teardown(() => gate.close())
    const { checks } = gate
    const logger = captureLogger()
    await fc.assert(
      fc.asyncProperty(mistyped, async ({ url, secret }) => {
        // A URL read as one of the forms is taken (and never shown but by hideUserinfo): only the refusals here.
        fc.pre(redisTarget(url) === undefined)
        const messages: string[] = []
        const refused = (action: () => unknown) => {
          try {
            action()
          } catch (error) {
            messages.push((error as Error).message)
          }
        }
        refused(() => checkIdempotencySpec(url))
        refused(() => createRedisClient(url))
        refused(() =>
          createGateway({
            target: 'http://127.0.0.1:1',
            checks,
            logger,
            idempotency: url,
            idempotencyFingerprintKey: FINGERPRINT_KEY,
          }),
        )
        await createGate({ policies: POLICIES_DIR, credentials, throttleRedis: url }).then(
          (gate) => gate.close(),
          (error: Error) => void messages.push(error.message),
        )
        return messages.length === 4 && messages.every((message) => hides(message, secret))
      }),
      runs(0.2),
    )
    t.pass('refused four times, no part of the password shown')
  },
)

t.test(
  'property: serve, run in-process, exits 2 without a part of the password in its output, from a flag or its variable',
  async (t) => {
    const dir = t.testdir({ 'bad-credentials.json': '{}' })
    const key = await writeFingerprintKey(dir)
    const common = ['--credentials', join(dir, 'bad-credentials.json'), '--idempotency-fingerprint-key', key]
    const where = fc.constantFrom('--target', '--idempotency', 'PAYMENTS_GATE_TARGET', 'PAYMENTS_GATE_IDEMPOTENCY')
    await fc.assert(
      fc.asyncProperty(mistyped, where, async ({ url, secret }, place) => {
        const fromFlag = place.startsWith('--')
        const target = place.endsWith('TARGET') ? url : 'http://127.0.0.1:1'
        const args = ['serve', ...common, ...(fromFlag ? [place, url] : [])]
        if (!(fromFlag && place === '--target')) args.push('--target', target)
        // An accepted URL goes on to the credentials, which are refused: every run ends at start-up, exit 2.
        const result = await runCliOnce(args, fromFlag ? {} : { [place]: url })
        return result.code === 2 && hides(result.stderr, secret) && hides(result.stdout, secret)
      }),
      runs(0.1),
    )
    t.pass('exit 2, no part of the password on stderr or in the logs')
  },
)

t.test(
  "serve: the issue's mistyped URLs and a query string, refused in one line, the password hidden; a real process too",
  async (t) => {
    const dir = t.testdir({ 'bad-credentials.json': '{}' })
    const key = await writeFingerprintKey(dir)
    const common = ['--credentials', join(dir, 'bad-credentials.json'), '--idempotency-fingerprint-key', key]
    const PW = TEST_REDIS_PASSWORD
    // The last in a real process, whose stderr is all the process wrote; the others in-process, through the same main.
    const cases: [args: string[], env: Record<string, string>, refusal: RegExp][] = [
      [['--target', `https:\\\\u:${PW}@h`], {}, /^payments-gate serve: --target="https:\*\*\*@h" must not hold a user/],
      [
        ['--target', 'http://127.0.0.1:1', '--idempotency', `redis:/:${PW}@h`],
        {},
        /^payments-gate serve: --idempotency "redis:\*\*\*@h" is none of /,
      ],
      [
        ['--target', 'http://127.0.0.1:1'],
        { PAYMENTS_GATE_IDEMPOTENCY: `redis://h?port=1&password=${PW}&enableOfflineQueue=false` },
        /^payments-gate serve: PAYMENTS_GATE_IDEMPOTENCY "redis:\/\/h\?\*\*\*" is none of .*; a query string \(\?\.\.\.\) is refused/,
      ],
    ]
    for (const [i, [args, env, refusal]] of cases.entries()) {
      let result: CliResult
      if (i < cases.length - 1) result = await runCliOnce(['serve', ...common, ...args], env)
      else {
        const running = spawnCli(['serve', ...common, ...args], env)
        // A process ended by a signal has no code: -1, never the 2 asserted.
        result = { code: (await running.exited) ?? -1, ...running.output() }
      }
      const { code, stdout, stderr } = result
      t.equal(code, 2, args.join(' '))
      t.match(stderr, refusal)
      t.equal(stderr.split('\n').length, 2, 'one line')
      t.notOk(`${stdout}${stderr}`.includes(PW), 'the password in no output')
    }
  },
)
