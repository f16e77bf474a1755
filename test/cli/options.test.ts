import fc from 'fast-check'
import t from 'tap'
import { parseAddress, parseServeOptions } from '../../lib/cli/options.js'
import { runs } from '../helpers/fuzz.js'

const required = ['--target', 'http://127.0.0.1:9000', '--credentials', 'creds.json']

/** The message of what parsing throws. */
function refusal(args: string[], env: Record<string, string> = {}): string {
  try {
    parseServeOptions(args, env)
  } catch (error) {
    return (error as Error).message
  }
  return 'accepted'
}

t.test('the defaults of docs/cli.md (serve)', async (t) => {
  const options = parseServeOptions(required, {})
  t.match(options, {
    listen: { host: undefined, port: 8080 },
    policies: './policies',
    credentials: 'creds.json',
    vendor: 'example',
    basePath: '',
    bodyLimit: 65536,
    timeout: 30000,
    admin: undefined,
    workers: 1,
    idempotency: 'memory',
    idempotencyTtl: 86400,
    idempotencyFailure: 'closed',
    idempotencyReplicas: 0,
    idempotencyMaxEntries: 1_000_000,
    idempotencyMaxBytes: 64 * 1024 * 1024,
    backendErrors: undefined,
    mode: 'enforce',
    trustProxy: 0,
    shutdownDelay: 5,
    drainTimeout: undefined,
  })
  t.equal(options.target.href, 'http://127.0.0.1:9000/')
  t.equal(options.where('timeout'), '--timeout', 'a default is named by its flag')
})

t.test('every flag, and every flag from its PAYMENTS_GATE_ variable; a flag wins', async (t) => {
  const flags = parseServeOptions(
    [
      ...required,
      '--listen',
      '0.0.0.0:81',
      '--policies',
      'p',
      '--vendor',
      'acme',
      '--base-path',
      '/v1',
      '--body-limit',
      '200',
      '--timeout',
      '5',
      '--admin',
      '127.0.0.1:9090',
      '--workers',
      '3',
    ],
    { PAYMENTS_GATE_LISTEN: '99' },
  )
  t.match(flags, {
    listen: { host: '0.0.0.0', port: 81 },
    policies: 'p',
    vendor: 'acme',
    basePath: '/v1',
    bodyLimit: 200,
    timeout: 5,
    admin: { host: '127.0.0.1', port: 9090 },
    workers: 3,
  })
  t.equal(flags.where('listen'), '--listen')
  const env = parseServeOptions([], {
    PAYMENTS_GATE_TARGET: 'http://backend:8000/base',
    PAYMENTS_GATE_CREDENTIALS: '/etc/gate/credentials.json',
    PAYMENTS_GATE_LISTEN: '[::1]:8443',
    PAYMENTS_GATE_BODY_LIMIT: '1024',
    PAYMENTS_GATE_WORKERS: 'auto',
    PAYMENTS_GATE_SHUTDOWN_DELAY: '0',
    PAYMENTS_GATE_DRAIN_TIMEOUT: '7',
    PAYMENTS_GATE_ADMIN: '',
  })
  t.match(env, {
    listen: { host: '::1', port: 8443 },
    credentials: '/etc/gate/credentials.json',
    bodyLimit: 1024,
    shutdownDelay: 0,
    drainTimeout: 7,
    admin: undefined,
  })
  t.equal(env.where('listen'), 'PAYMENTS_GATE_LISTEN')
  t.equal(env.where('admin'), '--admin', 'an empty variable is not set')
  t.ok(env.workers >= 1)
  const protection = parseServeOptions(required, {
    PAYMENTS_GATE_IDEMPOTENCY: 'redis://redis:6379/1',
    PAYMENTS_GATE_IDEMPOTENCY_TTL: '3600',
    PAYMENTS_GATE_IDEMPOTENCY_FAILURE: 'open',
  })
  t.match(
    protection,
    { idempotency: 'redis://redis:6379/1', idempotencyTtl: 3600, idempotencyFailure: 'open' },
    'and from the variables',
  )
  t.match(
    parseServeOptions([...required, '--idempotency', 'off'], { PAYMENTS_GATE_IDEMPOTENCY: 'memory' }),
    { idempotency: 'off' },
    'a flag wins',
  )
  t.match(parseServeOptions([...required, '--shutdown-delay=2', '--drain-timeout', '0'], {}), {
    shutdownDelay: 2,
    drainTimeout: 0,
  })
  const added = parseServeOptions(required, {
    PAYMENTS_GATE_IDEMPOTENCY_REPLICAS: '2',
    PAYMENTS_GATE_BACKEND_ERRORS: 'rules.json',
    PAYMENTS_GATE_MODE: 'report',
    PAYMENTS_GATE_TRUST_PROXY: '1',
  })
  t.match(
    added,
    { idempotencyReplicas: 2, backendErrors: 'rules.json', mode: 'report', trustProxy: 1 },
    'replicas, rules, mode and trusted proxies from their variables',
  )
  t.match(
    parseServeOptions(
      [
        ...required,
        '--idempotency-replicas',
        '1',
        '--backend-errors',
        'mine.json',
        '--mode',
        'enforce',
        '--trust-proxy',
        '2',
      ],
      { PAYMENTS_GATE_MODE: 'report', PAYMENTS_GATE_TRUST_PROXY: '1' },
    ),
    { idempotencyReplicas: 1, backendErrors: 'mine.json', mode: 'enforce', trustProxy: 2 },
    'or their flags, which win',
  )
  t.match(
    parseServeOptions(required, {
      PAYMENTS_GATE_IDEMPOTENCY_MAX_ENTRIES: '5000',
      PAYMENTS_GATE_IDEMPOTENCY_MAX_BYTES: '1048576',
    }),
    { idempotencyMaxEntries: 5000, idempotencyMaxBytes: 1048576 },
    "the memory store's bounds from their variables",
  )
  t.match(
    parseServeOptions([...required, '--idempotency-max-bytes', '205311', '--idempotency-max-entries', '7'], {}),
    { idempotencyMaxEntries: 7, idempotencyMaxBytes: 205311 },
    'and from their flags',
  )
})

t.test('a bad value names the flag, or the variable it came from, and says what to give', async (t) => {
  const cases: [string[], string][] = [
    [['--credentials', 'c'], '--target is required: give --target URL or set PAYMENTS_GATE_TARGET'],
    [['--target', 'http://x'], '--credentials is required: give --credentials FILE or set PAYMENTS_GATE_CREDENTIALS'],
    [
      ['--target', 'not a url', '--credentials', 'c'],
      '--target="not a url" must be an http:// or https:// URL, e.g. http://127.0.0.1:9000',
    ],
    [
      ['--target', 'ws://x', '--credentials', 'c'],
      '--target="ws://x" must be an http:// or https:// URL, e.g. https://payments.internal',
    ],
    [
      [...required, '--listen', 'host:99999'],
      '--listen="host:99999" must be PORT, HOST:PORT or [IPv6]:PORT, the port at most 65535',
    ],
    [[...required, '--listen', 'a:b'], '--listen="a:b" must be PORT, HOST:PORT or [IPv6]:PORT, the port at most 65535'],
    [[...required, '--body-limit', '1e3'], '--body-limit="1e3" must be a whole number of bytes from 167, below 2^53'],
    [[...required, '--timeout', '0'], '--timeout="0" must be a whole number of milliseconds from 1 to 3600000'],
    [[...required, '--workers', '0'], '--workers="0" must be a whole number of processes (or auto) from 1, below 2^53'],
    [
      [...required, '--workers', 'many'],
      '--workers="many" must be a whole number of processes (or auto) from 1, below 2^53',
    ],
    [
      [...required, '--vendor', 'a/b'],
      '--vendor="a/b" must be a media type name (RFC 6838): letters, digits and !#$&^_.+- only',
    ],
    [
      [...required, '--idempotency-ttl', '0'],
      '--idempotency-ttl="0" must be a whole number of seconds from 1, below 2^53 / 1000',
    ],
    [[...required, '--idempotency-failure', 'maybe'], '--idempotency-failure="maybe" must be closed or open'],
    [
      [...required, '--idempotency-replicas', 'two'],
      '--idempotency-replicas="two" must be a whole number of replicas from 0, below 2^53',
    ],
    [
      [...required, '--idempotency-max-entries', '0'],
      '--idempotency-max-entries="0" must be a whole number of keys from 1, below 2^53',
    ],
    [
      [...required, '--idempotency-max-bytes', '64MiB'],
      '--idempotency-max-bytes="64MiB" must be a whole number of bytes from 205311, below 2^53',
    ],
    [
      [...required, '--idempotency-max-bytes', '205310'],
      '--idempotency-max-bytes="205310" must be a whole number of bytes from 205311, below 2^53',
    ],
    [[...required, '--mode', 'audit'], '--mode="audit" must be enforce or report'],
    [[...required, '--trust-proxy', 'two'], '--trust-proxy="two" must be a whole number of proxies from 0, below 2^53'],
    [[...required, '--shutdown-delay=-1'], '--shutdown-delay="-1" must be a whole number of seconds from 0 to 2147483'],
    [
      [...required, '--drain-timeout', '1.5'],
      '--drain-timeout="1.5" must be a whole number of seconds from 0 to 2147483',
    ],
    [
      [...required, '--timeout', '2147483648'],
      '--timeout="2147483648" must be a whole number of milliseconds from 1 to 3600000',
    ],
    [
      [...required, '--timeout', '3600001'],
      '--timeout="3600001" must be a whole number of milliseconds from 1 to 3600000',
    ],
    [
      [...required, '--timeout', '9'.repeat(320)],
      `--timeout="${'9'.repeat(320)}" must be a whole number of milliseconds from 1 to 3600000`,
    ],
    [[...required, '--body-limit', '166'], '--body-limit="166" must be a whole number of bytes from 167, below 2^53'],
    [
      [...required, '--body-limit', '9007199254740992'],
      '--body-limit="9007199254740992" must be a whole number of bytes from 167, below 2^53',
    ],
    [
      [...required, '--shutdown-delay', '2147484'],
      '--shutdown-delay="2147484" must be a whole number of seconds from 0 to 2147483',
    ],
    [
      [...required, '--drain-timeout', '2147484'],
      '--drain-timeout="2147484" must be a whole number of seconds from 0 to 2147483',
    ],
    [
      ['--target', 'https://gate:s3cret-pass@backend:8443', '--credentials', 'c'],
      '--target="https://***@backend:8443" must not hold a user or password (USER:PASSWORD@); the gateway sends none',
    ],
    [[...required, '--timeout', '5', '--timeout', '6'], '--timeout is given more than once; give it once'],
    [[...required, '--nope'], 'unknown flag --nope; see payments-gate serve --help'],
    [[...required, '-n'], 'unknown flag -n; see payments-gate serve --help'],
    [[...required, '--timeout'], '--timeout needs a value: --timeout MS'],
    [[...required, 'extra'], 'too many arguments; usage: payments-gate serve --target URL --credentials FILE [flags]'],
  ]
  for (const [args, message] of cases) t.equal(refusal(args), message, args.join(' '))
  t.equal(
    refusal(required, { PAYMENTS_GATE_TIMEOUT: 'soon' }),
    'PAYMENTS_GATE_TIMEOUT="soon" must be a whole number of milliseconds from 1 to 3600000',
    'the variable, not a flag never set',
  )
  t.equal(
    refusal([], { PAYMENTS_GATE_TARGET: 'ftp://x', PAYMENTS_GATE_CREDENTIALS: 'c' }),
    'PAYMENTS_GATE_TARGET="ftp://x" must be an http:// or https:// URL, e.g. https://payments.internal',
  )
  t.same(parseAddress('9090'), { host: undefined, port: 9090 })
})

t.test('--base-path: /-separated segments of RFC 3986 path characters, no query, no spaces', async (t) => {
  for (const path of [
    '',
    '/',
    'api',
    '/api',
    '/api/',
    '/api/v1',
    "/a-b._~!$&'()*+,;=:@",
    '/caf%C3%A9',
    '/...',
    '/%2e%2e%2e',
  ]) {
    t.equal(parseServeOptions([...required, '--base-path', path], {}).basePath, path, `accepted: ${path}`)
  }
  for (const path of [
    '/my api',
    '/api?x=1',
    '/api#top',
    '//api',
    '/api//v1',
    '/./api',
    '/api/..',
    '/50%',
    '/%zz',
    '/ä',
    '/a\\b',
    // Red before: a dot segment escaped, which WHATWG URL reads as `..`, and escaped separators.
    '/%2e%2e',
    '/api/%2E',
    '/.%2e/x',
    '/a/%2F/b',
    '/a%5cb',
  ]) {
    t.match(
      refusal([...required, '--base-path', path]),
      /^--base-path=".*" must be a path such as \/api\/v1/,
      `refused: ${path}`,
    )
  }
})

t.test('--target-servername: a host name or an address, never empty', async (t) => {
  for (const name of ['payments.internal', '10.0.0.7', '::1', 'a_b-c'])
    t.equal(parseServeOptions([...required, '--target-servername', name], {}).targetServername, name, name)
  // Red before: an empty name taken, an SNI one engine sent and the other not.
  for (const name of ['', ' ', 'a b', 'a/b', 'é.example'])
    t.match(
      refusal([...required, `--target-servername=${name}`]),
      /^--target-servername=".*" must be a host name or address, e.g. payments.internal/,
      JSON.stringify(name),
    )
})

t.test('--listen and --admin read HOST:PORT as WHATWG URL reads an authority', async (t) => {
  const label = fc.stringMatching(/^[a-z0-9](?:[a-z0-9-]{0,6}[a-z0-9])?$/)
  const host = fc.oneof(
    fc.array(label, { minLength: 1, maxLength: 3 }).map((labels) => labels.join('.')),
    fc.ipV4(),
    fc.ipV6().map((address) => `[${address}]`),
  )
  // Up to five digits, leading zeros included: a port longer than that is refused by choice, WHATWG URL reads it.
  const port = fc
    .tuple(fc.nat({ max: 2 }), fc.nat({ max: 65535 }))
    .map(([zeros, n]) => `${'0'.repeat(zeros)}${n}`.slice(-5))
  fc.assert(
    fc.property(fc.option(host), port, (name, digits) => {
      const value = name === null ? digits : `${name}:${digits}`
      const ours = parseAddress(value)
      // A URL of a scheme that is not special keeps every port, a default one too.
      const url = new URL(`tcp://${name ?? 'localhost'}:${digits}`)
      const hostname =
        ours.host === undefined
          ? undefined
          : new URL(`tcp://${ours.host.includes(':') ? `[${ours.host}]` : ours.host}`).hostname
      return ours.port === Number(url.port) && hostname === (name === null ? undefined : url.hostname)
    }),
    runs(),
  )
})
