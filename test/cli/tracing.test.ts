import { spawn } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { startTracing, tracingRequested } from '../../lib/cli/tracing.js'
import { UsageError } from '../../lib/cli/io.js'
import { spawnCli } from '../helpers/cli.js'
import { TEST_PAN, saleBody, writeCredentials } from '../helpers/fixtures.js'
import { paymentHeaders, send } from '../helpers/http.js'
import { startReceiver } from '../helpers/otlp.js'
import { startBackend } from '../helpers/servers.js'

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
    const error = await startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1', OTEL_EXPORTER_OTLP_PROTOCOL: protocol }).catch((error: unknown) => error)
    t.type(error, UsageError, `${protocol}: a start-up failure, exit 2`)
  }
  await t.rejects(startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' }), /grpc is not supported/)
})

/** NODE_OPTIONS for a child that reports every module of the SDK it loads. */
const REPORT_LOADS = `${process.env.NODE_OPTIONS ?? ''} --import=${new URL('../helpers/report-otel-loads.mjs', import.meta.url).href}`

/** The variables that make a child report the SDK modules it loads, and a reader of that report. */
function reportLoads(dir: string): { env: Record<string, string>; loaded: () => string } {
  const file = join(dir, 'loads.txt')
  writeFileSync(file, '')
  return { env: { NODE_OPTIONS: REPORT_LOADS, PAYMENTS_GATE_TEST_LOADS: file }, loaded: () => readFileSync(file, 'utf8') }
}

t.test('the load report sees a module of the SDK when one is imported', async (t) => {
  const loads = reportLoads(t.testdir())
  const child = spawn(process.execPath, ['--input-type=module', '-e', "await import('@opentelemetry/exporter-trace-otlp-proto')"], { env: { ...process.env, ...loads.env }, stdio: 'ignore' })
  t.equal(await new Promise((resolve) => child.on('exit', resolve)), 0)
  t.match(loads.loaded(), /otel module loaded: @opentelemetry\/exporter-trace-otlp-proto/)
})

t.test('the real process without the variables: serve loads nothing of the SDK', async (t) => {
  const backend = await startBackend()
  t.teardown(() => backend.close())
  const dir = t.testdir()
  const credentials = await writeCredentials(dir)
  const loads = reportLoads(dir)
  const run = spawnCli(['serve', '--listen', '127.0.0.1:0', '--target', backend.url, '--credentials', credentials, '--shutdown-delay', '0'], loads.env)
  await run.waitFor(/"msg":"gateway listening"/)
  const port = Number(/"port":(\d+)},"target"/.exec(run.output().stdout)?.[1])
  t.equal((await send(`http://127.0.0.1:${port}`, { headers: paymentHeaders(), body: saleBody() })).status, 201)
  run.child.kill('SIGTERM')
  t.equal(await run.exited, 0)
  t.notMatch(loads.loaded(), /otel module loaded/)
})

t.test('the real process: serve exports its spans over OTLP (protobuf by default) and flushes them on SIGTERM', async (t) => {
  const receiver = await startReceiver(t)
  const backend = await startBackend()
  t.teardown(() => backend.close())
  const credentials = await writeCredentials(t.testdir())
  const run = spawnCli(['serve', '--listen', '127.0.0.1:0', '--target', backend.url, '--credentials', credentials, '--shutdown-delay', '0'], {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    // Longer than the test: only the drain sends them.
    OTEL_BSP_SCHEDULE_DELAY: '600000',
  })
  await run.waitFor(/"msg":"gateway listening"/)
  const port = Number(/"port":(\d+)},"target"/.exec(run.output().stdout)?.[1])
  t.equal((await send(`http://127.0.0.1:${port}`, { headers: paymentHeaders(), body: saleBody() })).status, 201)
  t.equal(receiver.exports.length, 0, 'nothing sent before the drain')
  run.child.kill('SIGTERM')
  t.equal(await run.exited, 0)
  t.ok(receiver.exports.length > 0, 'sent on the drain')
  t.ok(receiver.exports.every((received) => received.contentType === 'application/x-protobuf' && !received.body.includes(TEST_PAN)))
  const spans = receiver.spans()
  const server = spans.find((span) => span.name === 'POST sale')
  t.match(server, { kind: 2, service: 'payments-gate', attributes: { 'http.response.status_code': 201 } })
  t.match(spans.find((span) => span.kind === 3), { parentSpanId: server?.spanId })
  t.equal((backend.received[0]?.headers.traceparent as string | undefined)?.split('-')[1], server?.traceId)
})
