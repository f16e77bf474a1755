import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { isDeepStrictEqual } from 'node:util'
import t, { type Test } from 'tap'
import { flagName } from '../../lib/cli/flags.js'
import { SAMPLE_POLICIES } from '../../lib/package-files.js'
import { bind, checkApart, storePassword, unreadable } from '../../lib/cli/startup.js'
import { CodedError } from '../../lib/coded-error.js'
import { readFailure } from '../../lib/file-error.js'
import { COVERED, runCli, spawnCli, type CliResult } from '../helpers/cli.js'
import { writeCredentials, writeFingerprintKey } from '../helpers/fixtures.js'
import { takenPort } from '../helpers/servers.js'
import { until } from '../helpers/wait.js'

const dir = t.testdir({
  folder: {},
  'bad-policies': { 'default.json': '{"entity": "default"}' },
  'fifo-policies': {},
  'not-json.json': '{"users": [',
  'not-json-lines.json': 'not\r\njson\n',
  password: 'secret\n',
})
const credentials = await writeCredentials(dir)
const fingerprintKey = await writeFingerprintKey(dir)
// A FIFO opened for reading waits for a writer: a start-up that read it as a file would never end (docs/cli.md, files read).
execFileSync('mkfifo', [join(dir, 'fifo'), join(dir, 'fifo-policies', 'default.json')])
const target = 'http://127.0.0.1:9'

/** One line on stderr naming the problem, no errno code, no stack trace, nothing on stdout, exit 2. */
function isRefusal(t: Test, name: string, run: CliResult, line: string | RegExp): void {
  t.equal(run.code, 2, name)
  t.match(run.stderr, /^[^\n]+\n$/, `${name}: one line`)
  t.match(run.stderr, line, name)
  t.notMatch(run.stderr, /\bE[A-Z]{3,}\b|\n\s+at /, `${name}: no errno code, no stack trace`)
  t.equal(run.stdout.trim(), '', name)
}

/** What keeps a process alive (servers, sockets, timers, file reads), by kind and count. */
function resources(): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const kind of process.getActiveResourcesInfo()) counts[kind] = (counts[kind] ?? 0) + 1
  return counts
}

/** The signals serve handles. */
const SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const

/**
 * Where a refusal is shown: in this process, or by a real process, outside the coverage as every spawnCli child (the
 * lines of lib/ it runs are covered by the refusals in this process and other files' processes), or covered where none
 * other runs them (the primary of --workers runs only in a process of its own).
 */
type Where = 'in-process' | 'process' | 'covered process'

/**
 * The refusal in the real process, or in this one (`runCli`, the same `main`): there, no warning is emitted and
 * whatever it opened is closed soon after, as a process that exits needs.
 */
async function refused(
  t: Test,
  args: string[],
  env: Record<string, string>,
  line: string | RegExp,
  where: Where,
): Promise<void> {
  const name = `${where}: ${Object.entries(env)
    .map(([key, value]) => `${key}=${value} `)
    .join('')}${args.join(' ')}`
  if (where !== 'in-process') {
    const run = spawnCli(args, where === 'process' ? env : { ...env, ...COVERED })
    const code = (await run.exited) as number
    return isRefusal(t, name, { code, ...run.output() }, line)
  }
  const warnings: Error[] = []
  const warned = (warning: Error) => warnings.push(warning)
  process.on('warning', warned)
  const open = resources()
  const handlers = SIGNALS.map((signal) => process.listeners(signal))
  try {
    isRefusal(t, name, await runCli(args, '', env), line)
  } finally {
    process.off('warning', warned)
    // A refused serve may leave its signal handlers, which go with the process it would have had: dropped here.
    for (const [i, signal] of SIGNALS.entries())
      for (const handler of process.listeners(signal)) if (!handlers[i]?.includes(handler)) process.off(signal, handler)
  }
  t.ok(await until(() => isDeepStrictEqual(resources(), open)), `${name}: all it opened is closed`)
  t.same(warnings, [], `${name}: no warning`)
}

// Each kind of start-up error, each subcommand and each stage of serve's start-up (its files, its environment, the
// primary of --workers, a port taken after the rest is open) is shown by a real process, its exit code its own; the
// other refusals of each kind in this process, which must leave nothing open and warn of nothing.
t.test('each kind of start-up error is one line, exit 2, without an errno code', async (t) => {
  const port = await takenPort(t)
  const serve = ['serve', '--target', target]
  const cases: [string[], Record<string, string>, string | RegExp, Where][] = [
    [
      [...serve, '--credentials', join(dir, 'missing.json')],
      {},
      `payments-gate serve: --credentials: ${join(dir, 'missing.json')}: no such file or folder; give a credentials file as docs/credentials.md describes\n`,
      'process',
    ],
    [
      [...serve, '--workers', '2', '--idempotency', 'off'],
      { PAYMENTS_GATE_CREDENTIALS: join(dir, 'missing.json') },
      `payments-gate serve: PAYMENTS_GATE_CREDENTIALS: ${join(dir, 'missing.json')}: no such file or folder; give a credentials file as docs/credentials.md describes\n`,
      'covered process',
    ],
    [
      serve,
      { PAYMENTS_GATE_CREDENTIALS: join(dir, 'folder') },
      `payments-gate serve: PAYMENTS_GATE_CREDENTIALS: ${join(dir, 'folder')}: a folder, where a file is expected; give a credentials file as docs/credentials.md describes\n`,
      'in-process',
    ],
    [
      [...serve, '--credentials', join(dir, 'fifo')],
      {},
      `payments-gate serve: --credentials: ${join(dir, 'fifo')}: a named pipe (FIFO), where a regular file is expected; give a credentials file as docs/credentials.md describes\n`,
      'process',
    ],
    [
      [...serve, '--credentials', '/dev/zero'],
      {},
      'payments-gate serve: --credentials: /dev/zero: a device, where a regular file is expected; give a credentials file as docs/credentials.md describes\n',
      'in-process',
    ],
    [
      [...serve, '--credentials', credentials, '--policies', join(dir, 'fifo-policies')],
      {},
      /^payments-gate serve: --policies: .*default\.json: a named pipe \(FIFO\), where a regular file is expected; fix it /,
      'in-process',
    ],
    [
      [...serve, '--credentials', join(dir, 'not-json.json')],
      {},
      /^payments-gate serve: --credentials: .*not-json\.json: not JSON: .*; give a credentials file as docs\/credentials\.md describes\n$/,
      'in-process',
    ],
    [
      [...serve, '--credentials', join(dir, 'not-json-lines.json')],
      {},
      /^payments-gate serve: --credentials: .*not-json-lines\.json: not JSON: an unexpected character \(the text is not shown: it holds password hashes\); give a credentials file as docs\/credentials\.md describes\n$/,
      'in-process',
    ],
    [
      [...serve, '--credentials', credentials, '--policies', join(dir, 'nowhere')],
      {},
      `payments-gate serve: --policies: ${join(dir, 'nowhere')}: no such file or folder; give a readable folder of policy files (docs/policies.md), such as a copy of the samples in ${SAMPLE_POLICIES}\n`,
      'in-process',
    ],
    [
      [...serve, '--credentials', credentials],
      { PAYMENTS_GATE_POLICIES: credentials },
      `payments-gate serve: PAYMENTS_GATE_POLICIES: ${credentials}: not a folder, or a part of the path is not one; give a readable folder of policy files (docs/policies.md), such as a copy of the samples in ${SAMPLE_POLICIES}\n`,
      'in-process',
    ],
    [
      [...serve, '--credentials', credentials, '--policies', join(dir, 'bad-policies')],
      {},
      /^payments-gate serve: --policies: .*default\.json: .*; fix it \(payments-gate check-policies DIR lists every problem\)\n$/,
      'in-process',
    ],
    [
      [...serve, '--credentials', credentials, '--listen', `127.0.0.1:${port}`],
      {},
      `payments-gate serve: --listen: 127.0.0.1:${port} is in use; stop what listens there or give another port\n`,
      'process',
    ],
    [
      [...serve, '--credentials', credentials],
      { PAYMENTS_GATE_LISTEN: `127.0.0.1:${port}` },
      `payments-gate serve: PAYMENTS_GATE_LISTEN: 127.0.0.1:${port} is in use; stop what listens there or give another port\n`,
      'in-process',
    ],
    [
      [...serve, '--credentials', credentials, '--listen', '127.0.0.1:47321', '--admin', '127.0.0.1:47321'],
      {},
      "payments-gate serve: --admin: port 47321 is --listen's too; give the admin listener a port of its own\n",
      'in-process',
    ],
    [
      [...serve, '--credentials', credentials, '--listen', '127.0.0.1:47321'],
      { PAYMENTS_GATE_ADMIN: '47321' },
      "payments-gate serve: PAYMENTS_GATE_ADMIN: port 47321 is --listen's too; give the admin listener a port of its own\n",
      'in-process',
    ],
    [
      [...serve, '--credentials', credentials],
      { PAYMENTS_GATE_TIMEOUT: 'soon' },
      'payments-gate serve: PAYMENTS_GATE_TIMEOUT="soon" must be a whole number of milliseconds from 1 to 3600000\n',
      'in-process',
    ],
    [
      [...serve, '--credentials', credentials],
      { PAYMENTS_GATE_IDEMPOTENCY: 'mongodb://x' },
      'payments-gate serve: PAYMENTS_GATE_IDEMPOTENCY "mongodb://x" is none of memory, off, redis://HOST:PORT[/DB], rediss://HOST:PORT[/DB], redis-sentinel://HOST:PORT[,HOST:PORT...][/DB]#MASTER, rediss-sentinel://HOST:PORT[,HOST:PORT...][/DB]#MASTER, redis-cluster://HOST:PORT[,HOST:PORT...], rediss-cluster://HOST:PORT[,HOST:PORT...]\n',
      'process',
    ],
    [
      [...serve, '--credentials', credentials],
      { PAYMENTS_GATE_IDEMPOTENCY: 'redis-sentinel://:hunter2%zz@127.0.0.1:26379#m' },
      'payments-gate serve: PAYMENTS_GATE_IDEMPOTENCY "redis-sentinel://***@127.0.0.1:26379#m" is none of memory, off, redis://HOST:PORT[/DB], rediss://HOST:PORT[/DB], redis-sentinel://HOST:PORT[,HOST:PORT...][/DB]#MASTER, rediss-sentinel://HOST:PORT[,HOST:PORT...][/DB]#MASTER, redis-cluster://HOST:PORT[,HOST:PORT...], rediss-cluster://HOST:PORT[,HOST:PORT...]\n',
      'in-process',
    ],
    [
      [...serve, '--credentials', credentials, '--timeout', '1', '--timeout', '2'],
      {},
      'payments-gate serve: --timeout is given more than once; give it once\n',
      'in-process',
    ],
    [
      ['serve', '--credentials', credentials, '--target', 'http://user:hunter2@127.0.0.1:1'],
      {},
      'payments-gate serve: --target="http://***@127.0.0.1:1" must not hold a user or password (USER:PASSWORD@); the gateway sends none\n',
      'in-process',
    ],
    [
      [...serve, '--credentials', credentials, '--idempotency', 'redis://user@127.0.0.1:9'],
      { PAYMENTS_GATE_IDEMPOTENCY_PASSWORD_FILE: join(dir, 'missing') },
      `payments-gate serve: PAYMENTS_GATE_IDEMPOTENCY_PASSWORD_FILE: ${join(dir, 'missing')}: no such file or folder; give the file the Redis password is in\n`,
      'in-process',
    ],
    [
      [
        ...serve,
        '--credentials',
        credentials,
        '--idempotency-password-file',
        join(dir, 'password'),
        '--idempotency-fingerprint-key',
        fingerprintKey,
      ],
      { PAYMENTS_GATE_IDEMPOTENCY: 'redis://:own@127.0.0.1:9' },
      'payments-gate serve: PAYMENTS_GATE_IDEMPOTENCY: a password in the URL and another in --idempotency-password-file; give one\n',
      'in-process',
    ],
    [
      [...serve, '--credentials', credentials, '--idempotency-replicas', '1'],
      {},
      'payments-gate serve: --idempotency-replicas 1 needs a Redis store in --idempotency: only Redis has replicas to wait for\n',
      'in-process',
    ],
    [
      [...serve, '--credentials', credentials, '--idempotency', 'memory'],
      { PAYMENTS_GATE_IDEMPOTENCY_REPLICAS: '2' },
      'payments-gate serve: PAYMENTS_GATE_IDEMPOTENCY_REPLICAS 2 needs a Redis store in --idempotency: only Redis has replicas to wait for\n',
      'in-process',
    ],
    [
      [...serve, '--credentials', credentials, '--idempotency', 'redis://127.0.0.1:1/0'],
      {},
      'payments-gate serve: --idempotency-fingerprint-key must be given with a Redis store: every gateway sharing it fingerprints payments with the same key\n',
      'in-process',
    ],
    [
      [...serve, '--credentials', credentials, '--idempotency', 'redis://127.0.0.1:1/0'],
      { PAYMENTS_GATE_IDEMPOTENCY_FINGERPRINT_KEY: join(dir, 'not-json.json') },
      'payments-gate serve: PAYMENTS_GATE_IDEMPOTENCY_FINGERPRINT_KEY must hold one key, or two during a rotation (the current one first), each at least 32 bytes; make one with openssl rand -hex 32\n',
      'in-process',
    ],
    [
      [...serve, '--credentials', credentials, '--idempotency-fingerprint-key', join(dir, 'nowhere')],
      {},
      `payments-gate serve: --idempotency-fingerprint-key ${join(dir, 'nowhere')}: no such file or folder; give the file holding the key, one line of at least 32 bytes\n`,
      'in-process',
    ],
    [
      [
        ...serve,
        '--credentials',
        credentials,
        '--idempotency',
        'redis://127.0.0.1:1/0',
        '--idempotency-ca',
        credentials,
      ],
      {},
      'payments-gate serve: --idempotency-ca: --idempotency is not a TLS URL; give one of rediss://HOST:PORT[/DB], rediss-sentinel://HOST:PORT[,HOST:PORT...][/DB]#MASTER, rediss-cluster://HOST:PORT[,HOST:PORT...]\n',
      'in-process',
    ],
    [
      [...serve, '--credentials', credentials],
      { PAYMENTS_GATE_IDEMPOTENCY_CA: credentials },
      'payments-gate serve: PAYMENTS_GATE_IDEMPOTENCY_CA: --idempotency is not a TLS URL; give one of rediss://HOST:PORT[/DB], rediss-sentinel://HOST:PORT[,HOST:PORT...][/DB]#MASTER, rediss-cluster://HOST:PORT[,HOST:PORT...]\n',
      'in-process',
    ],
    [
      [...serve, '--credentials', credentials, '--idempotency-ca', join(dir, 'nowhere')],
      { PAYMENTS_GATE_IDEMPOTENCY: 'rediss://:hunter2@127.0.0.1:1/0' },
      `payments-gate serve: --idempotency-ca: ${join(dir, 'nowhere')}: no such file or folder; give the PEM bundle of the CA that issued the Redis certificate\n`,
      'in-process',
    ],
    [
      [
        ...serve,
        '--credentials',
        credentials,
        '--idempotency',
        'rediss-sentinel://127.0.0.1:1#m',
        '--idempotency-ca',
        credentials,
      ],
      {},
      `payments-gate serve: --idempotency-ca: ${credentials}: not a PEM certificate; give the PEM bundle of the CA that issued the Redis certificate\n`,
      'in-process',
    ],
    [
      [
        ...serve,
        '--credentials',
        credentials,
        '--idempotency-ca',
        '/dev/zero',
        '--idempotency',
        'rediss://127.0.0.1:1/0',
      ],
      {},
      'payments-gate serve: --idempotency-ca: /dev/zero: a device, where a regular file is expected; give the PEM bundle of the CA that issued the Redis certificate\n',
      'in-process',
    ],
    [
      ['serve', '--credentials', credentials],
      {},
      'payments-gate serve: --target is required: give --target URL or set PAYMENTS_GATE_TARGET\n',
      'in-process',
    ],
    [
      ['demo', '--listen', `127.0.0.1:${port}`],
      {},
      `payments-gate demo: --listen: 127.0.0.1:${port} is in use; stop what listens there or give another port\n`,
      'process',
    ],
    [
      ['demo', '--policies', join(dir, 'nowhere')],
      {},
      `payments-gate demo: --policies: ${join(dir, 'nowhere')}: no such file or folder; give a readable folder of policy files (docs/policies.md), such as a copy of the samples in ${SAMPLE_POLICIES}\n`,
      'in-process',
    ],
    [
      ['validate', '--operation', 'sale', join(dir, 'folder')],
      {},
      `payments-gate validate: ${join(dir, 'folder')}: a folder, where a file is expected; give the path of a file holding the body, or - for stdin\n`,
      'in-process',
    ],
    [
      ['validate', '--operation', 'sale', join(dir, 'fifo')],
      {},
      `payments-gate validate: ${join(dir, 'fifo')}: a named pipe (FIFO), where a regular file is expected; give the path of a file holding the body, or - for stdin\n`,
      'process',
    ],
    [
      ['validate', '--operation', 'sale', '--policies', join(dir, 'bad-policies'), '-'],
      {},
      /^payments-gate validate: --policies: .*default\.json: /,
      'in-process',
    ],
    [
      ['check-policies', credentials],
      {},
      `payments-gate check-policies: ${credentials}: not a folder, or a part of the path is not one; give a readable folder of policy files\n`,
      'process',
    ],
  ]
  // One at a time in this process, so that what each leaves open is its own; then a few processes at a time.
  for (const [args, env, line, where] of cases) if (where === 'in-process') await refused(t, args, env, line, where)
  const real = cases.filter(([, , , where]) => where !== 'in-process')
  for (let i = 0; i < real.length; i += 4)
    await Promise.all(real.slice(i, i + 4).map(([args, env, line, where]) => refused(t, args, env, line, where)))
})

t.test("checkApart: --admin on --listen's port, on one host or on every host, is refused", async (t) => {
  const where = (key: string) => `--${key}`
  const apart = (admin: [string | undefined, number], listen: [string | undefined, number]) =>
    checkApart({ host: admin[0], port: admin[1] }, { host: listen[0], port: listen[1] }, where)
  t.throws(() => apart(['127.0.0.1', 8080], [undefined, 8080]), { message: /port 8080 is --listen's too/ })
  t.throws(() => apart(['127.0.0.1', 8080], ['::', 8080]), { message: /port 8080 is --listen's too/ })
  t.doesNotThrow(() => apart(['127.0.0.1', 8080], ['10.0.0.1', 8080]), 'two hosts, each its own')
  t.doesNotThrow(() => apart(['127.0.0.1', 9901], ['127.0.0.1', 8080]), 'two ports')
  t.doesNotThrow(() => apart(['127.0.0.1', 0], ['127.0.0.1', 0]), 'port 0: two ports the system picks')
})

t.test('bind: a failure it has no words for still says where and what to do', async (t) => {
  const failing = () => Promise.reject(Object.assign(new Error('odd'), { code: 'EODD' }))
  await t.rejects(bind('--admin', { host: undefined, port: 9901 }, failing), {
    message: '--admin: port 9901 cannot be listened on; give another address',
  })
})

t.test('unreadable: an error that is not about a file goes on as it is', async (t) => {
  const bug = new TypeError('a bug')
  t.equal(unreadable(bug, String), bug)
  const usage = new CodedError('EUSAGE', 'already one line')
  t.equal(unreadable(usage, String), usage, 'one of ours that names no file')
})

t.test('readFailure: a code it has no words for is "cannot be read"', async (t) => {
  t.equal(readFailure(Object.assign(new Error('EIO: i/o error'), { code: 'EIO' })), 'cannot be read')
  t.equal(readFailure(Object.assign(new Error('EACCES'), { code: 'EACCES' })), 'permission denied')
})

t.test(
  '--idempotency-password-file: read once, trailing newlines dropped; an empty or missing file, a store that is not Redis are refused',
  async (t) => {
    const dir = t.testdir({ password: 'secret\r\n\n', empty: '\n' })
    t.equal(await storePassword(undefined, 'memory', flagName), undefined)
    t.equal(await storePassword(join(dir, 'password'), 'redis://user@host:6379', flagName), 'secret')
    await t.rejects(
      storePassword(join(dir, 'empty'), 'redis://host', flagName),
      new CodedError(
        'EUSAGE',
        `--idempotency-password-file: ${join(dir, 'empty')} is empty; give the file the Redis password is in`,
      ),
    )
    await t.rejects(
      storePassword(join(dir, 'missing'), 'redis://host', flagName),
      new CodedError(
        'EUSAGE',
        `--idempotency-password-file: ${join(dir, 'missing')}: no such file or folder; give the file the Redis password is in`,
      ),
    )
    await t.rejects(
      storePassword(join(dir, 'password'), 'memory', flagName),
      new CodedError('EUSAGE', '--idempotency-password-file: --idempotency is not a Redis URL'),
    )
  },
)
