import t from 'tap'
import { envName, parseAddress, parseServeOptions } from '../../lib/cli/options.js'

const required = ['--target', 'http://127.0.0.1:9000', '--credentials', 'creds.json']

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
  })
  t.equal(options.target.href, 'http://127.0.0.1:9000/')
})

t.test('every flag, and every flag from its PAYMENTS_GATE_ variable; a flag wins', async (t) => {
  const flags = parseServeOptions(
    [...required, '--listen', '0.0.0.0:81', '--policies', 'p', '--vendor', 'acme', '--base-path', '/v1', '--body-limit', '10', '--timeout', '5', '--admin', '127.0.0.1:9090', '--workers', '3'],
    { PAYMENTS_GATE_LISTEN: '99' },
  )
  t.match(flags, { listen: { host: '0.0.0.0', port: 81 }, policies: 'p', vendor: 'acme', basePath: '/v1', bodyLimit: 10, timeout: 5, admin: { host: '127.0.0.1', port: 9090 }, workers: 3 })
  const env = parseServeOptions([], {
    PAYMENTS_GATE_TARGET: 'http://backend:8000/base',
    PAYMENTS_GATE_CREDENTIALS: '/etc/gate/credentials.json',
    PAYMENTS_GATE_LISTEN: '[::1]:8443',
    PAYMENTS_GATE_BODY_LIMIT: '1024',
    PAYMENTS_GATE_WORKERS: 'auto',
  })
  t.match(env, { listen: { host: '::1', port: 8443 }, credentials: '/etc/gate/credentials.json', bodyLimit: 1024 })
  t.ok(env.workers >= 1)
  t.equal(envName('base-path'), 'PAYMENTS_GATE_BASE_PATH')
  t.match(parseServeOptions(required, {}), { idempotency: 'memory', idempotencyTtl: 86400, idempotencyFailure: 'closed', idempotencyReplicas: 0, idempotencyMaxEntries: 1_000_000, idempotencyMaxBytes: 64 * 1024 * 1024 }, 'retry protection by default')
  const protection = parseServeOptions(required, {
    PAYMENTS_GATE_IDEMPOTENCY: 'redis://redis:6379/1',
    PAYMENTS_GATE_IDEMPOTENCY_TTL: '3600',
    PAYMENTS_GATE_IDEMPOTENCY_FAILURE: 'open',
    PAYMENTS_GATE_IDEMPOTENCY_REPLICAS: '2',
    PAYMENTS_GATE_IDEMPOTENCY_MAX_ENTRIES: '5000',
    PAYMENTS_GATE_IDEMPOTENCY_MAX_BYTES: '1048576',
  })
  t.match(protection, { idempotency: 'redis://redis:6379/1', idempotencyTtl: 3600, idempotencyFailure: 'open', idempotencyReplicas: 2, idempotencyMaxEntries: 5000, idempotencyMaxBytes: 1048576 }, 'and from the variables')
  t.match(parseServeOptions([...required, '--idempotency-replicas', '1'], {}), { idempotencyReplicas: 1 }, '--idempotency-replicas')
  t.match(parseServeOptions([...required, '--idempotency-max-bytes', '2048', '--idempotency-max-entries', '7'], {}), { idempotencyMaxEntries: 7, idempotencyMaxBytes: 2048 }, 'the memory store bounds from flags')
  t.match(parseServeOptions([...required, '--idempotency', 'off'], { PAYMENTS_GATE_IDEMPOTENCY: 'memory' }), { idempotency: 'off' }, 'a flag wins')
  t.match(parseServeOptions(required, {}), { trustProxy: 0 }, 'no proxy trusted by default')
  t.match(parseServeOptions([...required, '--trust-proxy', '2'], { PAYMENTS_GATE_TRUST_PROXY: '1' }), { trustProxy: 2 })
  t.match(parseServeOptions(required, { PAYMENTS_GATE_TRUST_PROXY: '1' }), { trustProxy: 1 })
  t.equal(parseServeOptions(required, {}).backendErrors, undefined, 'no backend-errors rules by default')
  t.equal(parseServeOptions(required, { PAYMENTS_GATE_BACKEND_ERRORS: 'rules.json' }).backendErrors, 'rules.json', 'the rules file from its variable')
  t.equal(parseServeOptions([...required, '--backend-errors', 'mine.json'], { PAYMENTS_GATE_BACKEND_ERRORS: 'rules.json' }).backendErrors, 'mine.json', 'or its flag')
  t.match(parseServeOptions(required, {}), { mode: 'enforce' }, 'enforce mode by default')
  t.match(parseServeOptions(required, { PAYMENTS_GATE_MODE: 'report' }), { mode: 'report' }, 'report mode from the variable')
  t.match(parseServeOptions([...required, '--mode', 'enforce'], { PAYMENTS_GATE_MODE: 'report' }), { mode: 'enforce' }, 'and the flag wins')
})

t.test('bad values are refused with the flag named', async (t) => {
  const cases: [string[], RegExp][] = [
    [['--credentials', 'c'], /--target is required/],
    [['--target', 'http://x'], /--credentials is required/],
    [['--target', 'not a url', '--credentials', 'c'], /--target must be a URL/],
    [['--target', 'https://x', '--credentials', 'c'], /--target must be an http:\/\/ URL/],
    [[...required, '--listen', 'host:99999'], /--listen must be PORT or HOST:PORT/],
    [[...required, '--listen', 'a:b'], /--listen must be PORT or HOST:PORT/],
    [[...required, '--body-limit', '1e3'], /--body-limit must be a whole number/],
    [[...required, '--timeout', '0'], /--timeout must be at least 1 ms/],
    [[...required, '--workers', '0'], /--workers must be at least 1/],
    [[...required, '--vendor', 'a/b'], /--vendor must be a media type name/],
    [[...required, '--idempotency-ttl', '0'], /--idempotency-ttl must be at least 1 second/],
    [[...required, '--idempotency-failure', 'maybe'], /--idempotency-failure must be closed or open, got "maybe"/],
    [[...required, '--idempotency-max-entries', '0'], /--idempotency-max-entries must be at least 1/],
    [[...required, '--idempotency-max-bytes', '0'], /--idempotency-max-bytes must be at least 1/],
    [[...required, '--idempotency-max-bytes', '64MiB'], /--idempotency-max-bytes must be a whole number/],
    [[...required, '--trust-proxy', 'two'], /--trust-proxy must be a whole number/],
    [[...required, '--idempotency-replicas', 'two'], /--idempotency-replicas must be a whole number/],
    [[...required, '--mode', 'audit'], /--mode must be enforce or report, got "audit"/],
  ]
  for (const [args, message] of cases) t.throws(() => parseServeOptions(args, {}), { message }, args.join(' '))
  t.throws(() => parseServeOptions([...required, '--nope'], {}), { code: 'ERR_PARSE_ARGS_UNKNOWN_OPTION' })
  t.same(parseAddress('admin', '9090'), { host: undefined, port: 9090 })
})
