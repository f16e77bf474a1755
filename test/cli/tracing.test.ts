import { spawn } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { trace } from '@opentelemetry/api'
import t from 'tap'
import { batchSetting, flushBound, samplerSetting, startTracing, tracingRequested } from '../../lib/cli/tracing.js'
import { CodedError, isCoded } from '../../lib/coded-error.js'
import { DEFAULTS } from '../../lib/defaults.js'
import { boundPorts, COVERED, spawnCli } from '../helpers/cli.js'
import { TEST_PAN, saleBody, writeCredentials } from '../helpers/fixtures.js'
import { paymentHeaders, send, until } from '../helpers/http.js'
import { startReceiver } from '../helpers/otlp.js'
import { uncovered } from '../helpers/uncovered.js'
import { freePort, serveOnLoopback, startBackend } from '../helpers/servers.js'

// One test at a time: one of them sets the exporter's variables in this process's environment, which every child
// started here inherits.

t.test(
  'the real process with a collector that takes the spans and never answers, under a 60 s exporter timeout: exit 0 soon after "stopped"',
  async (t) => {
    // Accepts every export and never answers: only the flush's bound ends it, OTEL_BSP_EXPORT_TIMEOUT's 1 s here.
    const { port: collector } = await serveOnLoopback(t, () => undefined)
    const backend = await startBackend()
    t.teardown(() => backend.close())
    const credentials = await writeCredentials(t.testdir())
    const run = spawnCli(['serve', '--listen', '127.0.0.1:0', '--target', backend.url, '--credentials', credentials], {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${collector}`,
      OTEL_EXPORTER_OTLP_TIMEOUT: '60000',
      OTEL_BSP_EXPORT_TIMEOUT: '1000',
      OTEL_BSP_SCHEDULE_DELAY: '600000',
      PAYMENTS_GATE_SHUTDOWN_DELAY: '0',
      ...COVERED,
    })
    t.teardown(() => void run.child.kill('SIGKILL'))
    const { listen: port } = await boundPorts(run)
    t.equal((await send(`http://127.0.0.1:${port}`, { headers: paymentHeaders(), body: saleBody() })).status, 201)
    run.child.kill('SIGTERM')
    await run.waitFor(/"msg":"stopped"/)
    // Generous for a loaded machine, and far below the 60 s the exporter would hold its request open.
    t.ok(await until(() => run.child.exitCode !== null, 15_000), 'exited soon after "stopped"')
    t.equal(await run.exited, 0)
    t.match(run.output().stdout, /"msg":"spans not sent to the collector, dropped"[^]*"msg":"stopped"/)
  },
)

t.test('the standard variables that ask for traces over OTLP', async (t) => {
  const endpoint = 'http://collector:4318'
  const cases: [Record<string, string>, boolean][] = [
    [{}, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint }, true],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${endpoint}/v1/traces` }, true],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: '' }, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_TRACES_EXPORTER: 'otlp' }, true],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_TRACES_EXPORTER: '' }, true],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_TRACES_EXPORTER: 'none' }, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_TRACES_EXPORTER: 'console' }, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_SDK_DISABLED: 'true' }, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_SDK_DISABLED: 'TRUE' }, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_SDK_DISABLED: 'false' }, true],
  ]
  for (const [env, expected] of cases) t.equal(tracingRequested(env), expected, JSON.stringify(env))
})

t.test('nothing is started without the variables; a protocol other than the two HTTP ones is refused', async (t) => {
  t.equal(await startTracing({}), undefined)
  for (const protocol of ['grpc', 'http/thrift']) {
    const error = await startTracing({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1',
      OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
    }).catch((error: unknown) => error)
    t.ok(isCoded(error, 'EUSAGE'), `${protocol}: a start-up failure, exit 2`)
  }
  await t.rejects(
    startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' }),
    /grpc is not supported/,
  )
})

t.test(
  'OTEL_TRACES_SAMPLER and its argument, as the specification reads them; a sampler or ratio it does not know stops start-up',
  async (t) => {
    t.same(
      samplerSetting({}),
      { parentBased: false, root: 'always_on', ratio: 1 },
      'always_on by default: an outside parent does not decide (docs/tracing.md, sampling at the edge)',
    )
    t.same(samplerSetting({ OTEL_TRACES_SAMPLER: ' ' }), { parentBased: false, root: 'always_on', ratio: 1 })
    t.same(samplerSetting({ OTEL_TRACES_SAMPLER: 'parentbased_always_on' }), {
      parentBased: true,
      root: 'always_on',
      ratio: 1,
    })
    t.same(samplerSetting({ OTEL_TRACES_SAMPLER: 'Always_Off' }), { parentBased: false, root: 'always_off', ratio: 1 })
    t.same(samplerSetting({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' }), {
      parentBased: false,
      root: 'traceidratio',
      ratio: 0,
    })
    t.same(samplerSetting({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1' }), {
      parentBased: true,
      root: 'traceidratio',
      ratio: 0.1,
    })
    t.same(
      samplerSetting({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio' }),
      { parentBased: true, root: 'traceidratio', ratio: 1 },
      'a ratio of 1 by default',
    )
    t.throws(
      () => samplerSetting({ OTEL_TRACES_SAMPLER: 'jaeger_remote' }),
      new CodedError(
        'EUSAGE',
        'OTEL_TRACES_SAMPLER: jaeger_remote is not supported; use one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio',
      ),
    )
    t.throws(
      () => samplerSetting({ OTEL_TRACES_SAMPLER: 'constructor' }),
      /constructor is not supported/,
      'no key of Object.prototype',
    )
    for (const arg of ['-0.5', '1.5', 'half']) {
      t.throws(
        () => samplerSetting({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: arg }),
        new CodedError('EUSAGE', `OTEL_TRACES_SAMPLER_ARG="${arg}" must be a ratio from 0 to 1`),
      )
    }
  },
)

t.test('OTEL_BSP_*: the batch settings, unset ones left to the SDK, a bad one stops start-up', async (t) => {
  t.same(batchSetting({}), {})
  t.same(
    batchSetting({
      OTEL_BSP_SCHEDULE_DELAY: '200',
      OTEL_BSP_EXPORT_TIMEOUT: ' 1000 ',
      OTEL_BSP_MAX_QUEUE_SIZE: '',
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '64',
    }),
    {
      scheduledDelayMillis: 200,
      exportTimeoutMillis: 1000,
      maxExportBatchSize: 64,
    },
  )
  for (const value of ['0', '1.5', 'soon']) {
    t.throws(
      () => batchSetting({ OTEL_BSP_MAX_QUEUE_SIZE: value }),
      new CodedError('EUSAGE', `OTEL_BSP_MAX_QUEUE_SIZE="${value}" must be a whole number, at least 1`),
    )
  }
})

t.test('the load report of cli/serve.test.ts sees a module of the SDK when one is imported', async (t) => {
  // cli/serve.test.ts shows with it that the real process without the variables loads nothing of the SDK.
  const loads = join(t.testdir(), 'loads.txt')
  writeFileSync(loads, '')
  const report = new URL('../helpers/report-loads.mjs', import.meta.url).href
  // As cli/serve.test.ts's child: no coverage, so none of tap's hooks.
  const env = { ...process.env, NODE_OPTIONS: `--import=${report}`, PAYMENTS_GATE_TEST_LOADS: loads }
  const child = spawn(
    ...uncovered(['--input-type=module', '-e', "await import('@opentelemetry/exporter-trace-otlp-proto')"], env),
    { env, stdio: 'ignore' },
  )
  t.equal(await new Promise((resolve) => child.on('exit', resolve)), 0)
  t.match(readFileSync(loads, 'utf8'), /^@opentelemetry\/exporter-trace-otlp-proto\//m)
})

t.test(
  'the real process: serve exports its spans over OTLP (protobuf by default) and flushes them on SIGTERM',
  async (t) => {
    const receiver = await startReceiver(t)
    const backend = await startBackend()
    t.teardown(() => backend.close())
    const credentials = await writeCredentials(t.testdir())
    const run = spawnCli(
      [
        'serve',
        '--listen',
        '127.0.0.1:0',
        '--target',
        backend.url,
        '--credentials',
        credentials,
        '--shutdown-delay',
        '0',
      ],
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        // Longer than the test: only the drain sends them.
        OTEL_BSP_SCHEDULE_DELAY: '600000',
      },
    )
    const { listen: port } = await boundPorts(run)
    t.equal((await send(`http://127.0.0.1:${port}`, { headers: paymentHeaders(), body: saleBody() })).status, 201)
    // An outside client that asks for its request not to be sampled (flags 00): the edge's default sampler does not obey.
    const outside = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7' }
    const unsampled = { ...paymentHeaders(), traceparent: `00-${outside.traceId}-${outside.spanId}-00` }
    const second = saleBody()
    second.transactionReference = 'order-1234/b'
    t.equal((await send(`http://127.0.0.1:${port}`, { headers: unsampled, body: second })).status, 201)
    t.equal(receiver.exports.length, 0, 'nothing sent before the drain')
    run.child.kill('SIGTERM')
    t.equal(await run.exited, 0)
    t.ok(receiver.exports.length > 0, 'sent on the drain')
    t.ok(
      receiver.exports.every(
        (received) => received.contentType === 'application/x-protobuf' && !received.body.includes(TEST_PAN),
      ),
    )
    const spans = receiver.spans()
    const server = spans.find((span) => span.name === 'POST sale' && span.traceId !== outside.traceId)
    t.match(
      spans.find((span) => span.name === 'POST sale' && span.traceId === outside.traceId),
      { kind: 2, parentSpanId: outside.spanId },
      "the unsampled outside request is traced all the same, in the client's trace",
    )
    t.match(server, { kind: 2, service: 'payments-gate', attributes: { 'http.response.status_code': 201 } })
    t.match(
      spans.find((span) => span.kind === 3),
      { parentSpanId: server?.spanId },
    )
    t.equal((backend.received[0]?.headers.traceparent as string | undefined)?.split('-')[1], server?.traceId)
  },
)

t.test('the flush on stop is bounded: a collector that takes the spans and never answers is given up on', async (t) => {
  // Holds every export open: only the bound ends the wait.
  let received = 0
  const { port } = await serveOnLoopback(t, () => received++)
  // The exporter reads its variables from the process's environment, not from the one given to startTracing; its
  // timeout, above the bound, only keeps this test's process from retrying for long once the collector is closed.
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${port}`
  process.env.OTEL_EXPORTER_OTLP_TIMEOUT = '1000'
  t.teardown(() => {
    delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT
    delete process.env.OTEL_EXPORTER_OTLP_TIMEOUT
  })
  const tracing = await startTracing(process.env)
  trace.getTracer('test').startSpan('queued').end()
  await t.rejects(tracing!.shutdown(200), /the spans still queued were not sent within 200 ms/)
  // On a loaded machine the export may reach the collector after the bound: it was sent, and is held all the same.
  t.ok(await until(() => received >= 1), 'the export reached the collector, which held it')
  t.equal(trace.getTracer('test').startSpan('after').isRecording(), false, 'the SDK is unregistered all the same')

  // The bound serve's stop uses: OTEL_BSP_EXPORT_TIMEOUT's when that is shorter than the default.
  const shorter = await startTracing({ ...process.env, OTEL_BSP_EXPORT_TIMEOUT: '300' })
  trace.getTracer('test').startSpan('queued').end()
  await t.rejects(shorter!.shutdown(), /the spans still queued were not sent within 300 ms/)
  t.ok(await until(() => received >= 2), 'the second export reached the collector, which held it')
})

t.test('the bound of the flush on stop: 10 s, or OTEL_BSP_EXPORT_TIMEOUT when that is shorter', async (t) => {
  t.equal(flushBound({}), DEFAULTS.traceFlushMs)
  t.equal(DEFAULTS.traceFlushMs, 10_000, 'docs/tracing.md')
  t.equal(flushBound(batchSetting({ OTEL_BSP_EXPORT_TIMEOUT: '1000' })), 1000)
  t.equal(flushBound(batchSetting({ OTEL_BSP_EXPORT_TIMEOUT: '60000' })), DEFAULTS.traceFlushMs)
  t.equal(flushBound(batchSetting({ OTEL_BSP_SCHEDULE_DELAY: '100' })), DEFAULTS.traceFlushMs)
})

t.test(
  'the real process with its collector down: SIGTERM logs the spans it could not send, finishes the clean-up and exits 0',
  async (t) => {
    const backend = await startBackend()
    t.teardown(() => backend.close())
    const credentials = await writeCredentials(t.testdir())
    const run = spawnCli(['serve', '--listen', '127.0.0.1:0', '--target', backend.url, '--credentials', credentials], {
      // Nothing listens there: every export is refused until the exporter's timeout.
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${await freePort()}`,
      OTEL_EXPORTER_OTLP_TIMEOUT: '500',
      OTEL_BSP_SCHEDULE_DELAY: '600000',
      PAYMENTS_GATE_SHUTDOWN_DELAY: '0',
    })
    t.teardown(() => void run.child.kill('SIGKILL'))
    const { listen: port } = await boundPorts(run)
    t.equal((await send(`http://127.0.0.1:${port}`, { headers: paymentHeaders(), body: saleBody() })).status, 201)
    run.child.kill('SIGTERM')
    t.equal(await run.exited, 0)
    const { stdout, stderr } = run.output()
    t.match(stdout, /"level":40,[^\n]*"msg":"spans not sent to the collector, dropped"[^]*"msg":"stopped"/)
    t.notMatch(stderr, /at async/, 'no stack')
  },
)
