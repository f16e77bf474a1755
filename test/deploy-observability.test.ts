// deploy/grafana-dashboard.json and deploy/prometheus-rules.yaml (docs/logs-and-metrics.md): every metric they
// read is one a real gateway exports, the rules pass promtool's check and their unit tests (one per alert), and
// every query of the dashboard parses. Grafana cannot run here: the dashboard is checked statically.
import { spawnSync } from 'node:child_process'
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs'
import { rename, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { parse, stringify } from 'yaml'
import { COVERED, spawnCli } from './helpers/cli.js'
import { saleBody, writeCredentials } from './helpers/fixtures.js'
import { paymentHeaders, send, until } from './helpers/http.js'
import { onPath } from './helpers/provision.js'
import { freePort, startBackend } from './helpers/servers.js'

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8')
/** Every query's data source: Grafana's data source variable. */
// eslint-disable-next-line no-template-curly-in-string -- Grafana's variable, not a template literal
const DATASOURCE = { type: 'prometheus', uid: '${datasource}' }

interface Rule {
  readonly record?: string
  readonly alert?: string
  readonly expr: string
}
interface Target {
  readonly refId: string
  readonly expr: string
  readonly datasource?: { type: string; uid: string }
}
interface Panel {
  readonly id: number
  readonly type: string
  readonly title: string
  readonly datasource?: { type: string; uid: string }
  readonly gridPos: { h: number; w: number; x: number; y: number }
  readonly targets?: Target[]
}
interface Variable {
  readonly name: string
  readonly type: string
  readonly query: string | { query: string }
}

const ruleObject = parse(read('deploy/prometheus-rules.yaml'))
const groups = ruleObject.spec.groups as { name: string; rules: Rule[] }[]
const rules = groups.flatMap((group) => group.rules)
const alerts = rules.filter((rule) => rule.alert !== undefined)
const recorded = new Set(rules.flatMap((rule) => (rule.record === undefined ? [] : [rule.record])))
const unitTests = parse(read('deploy/prometheus-rules.test.yaml'))
const dashboard = JSON.parse(read('deploy/grafana-dashboard.json'))
const panels = dashboard.panels as Panel[]
const variables = dashboard.templating.list as Variable[]
const queried = panels.filter((panel) => panel.type !== 'row')

/** Grafana's variables as a query sees them: the intervals as durations, `$job` and `$entity` inside regex matchers. */
function substituted(expr: string): string {
  return expr
    .replaceAll('$__rate_interval', '5m')
    .replaceAll('$__interval', '1m')
    .replaceAll('$job', '.*')
    .replaceAll('$entity', '.*')
}

/** The selector a `label_values(SELECTOR, label)` variable reads. */
function variableSelector(variable: Variable): string {
  const query = typeof variable.query === 'string' ? variable.query : variable.query.query
  const match = /^label_values\((.+), *\w+\)$/.exec(query)
  if (match === null) throw new Error(`variable ${variable.name}: not label_values(SELECTOR, label): ${query}`)
  return match[1] as string
}

const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'offset',
  'bool',
  'inf',
  'nan',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
])

/**
 * The metric names a PromQL expression reads: strings, label matchers, ranges and label lists
 * dropped, the identifiers left that are not functions (followed by a parenthesis) or keywords.
 */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '')
  const names = [...bare.matchAll(/(?<![\w.:])[a-zA-Z_:][\w:]*(?![\w:]|\s*\()/g)].map((match) => match[0])
  return names.filter((name) => !KEYWORDS.has(name))
}

/** Every expression the two files hold, named for the messages. */
const expressions: [string, string][] = [
  ...rules.map((rule): [string, string] => [`rule ${rule.alert ?? rule.record}`, rule.expr]),
  ...queried.flatMap((panel) =>
    (panel.targets ?? []).map((target): [string, string] => [
      `panel "${panel.title}" ${target.refId}`,
      substituted(target.expr),
    ]),
  ),
  ...variables
    .filter((variable) => variable.type === 'query')
    .map((variable): [string, string] => [`variable ${variable.name}`, substituted(variableSelector(variable))]),
]

/** promtool, or the reason the test that needs it is skipped (test/before.ts installs it). */
function promtool(t: Test, args: string[]): { status: number | null; output: string } | undefined {
  if (!onPath('promtool', process.env.PATH)) {
    if (process.env.CI !== 'true' && process.env.PAYMENTS_GATE_SKIP_REDIS === '1')
      t.skip('promtool is not on PATH. Skipped: PAYMENTS_GATE_SKIP_REDIS=1', () => {})
    else t.fail('promtool is not on PATH (test/before.ts installs it: apt-get install -y prometheus)')
    return undefined
  }
  const run = spawnSync('promtool', args, { encoding: 'utf8', timeout: 60_000 })
  return { status: run.status, output: `${run.stdout}${run.stderr}` }
}

t.test('the metric-name reader finds the names, and only them', async (t) => {
  t.same(
    metricNames(
      'sum by (le, operation) (rate(a_bucket{job=~"x", b="c{d}"}[5m] offset 1h)) / ignoring (kind) group_left b:c:rate5m > 0.5 and on (job) inf',
    ),
    ['a_bucket', 'b:c:rate5m'],
  )
  t.same(metricNames('histogram_quantile(0.99, sum(rate(x[1m])))'), ['x'])
})

t.test('every metric the rules and the dashboard read is one a real gateway exports on /metrics', async (t) => {
  const backend = await startBackend()
  t.teardown(() => backend.close())
  const dir = t.testdir({
    'rules.json': JSON.stringify({ rules: [{ status: 400, errorName: 'legacyRefusal', message: 'Refused.' }] }),
  })
  const credentials = await writeCredentials(dir)
  const [listen, admin] = [await freePort(), await freePort()]
  const args = [
    'serve',
    '--listen',
    `127.0.0.1:${listen}`,
    '--admin',
    `127.0.0.1:${admin}`,
    '--target',
    backend.url,
    '--credentials',
    credentials,
  ]
  const run = spawnCli(
    [...args, '--policies', 'policies', '--backend-errors', join(dir, 'rules.json'), '--shutdown-delay', '0'],
    COVERED,
  )
  t.teardown(() => void run.child.kill('SIGKILL'))
  await run.waitFor(/"msg":"gateway listening"/)
  t.equal(
    (await send(listen, { headers: paymentHeaders(), body: saleBody({ transactionReference: 'observed-1' }) })).status,
    201,
  )
  t.equal((await send(listen, { headers: paymentHeaders(), body: saleBody({ transactionReference: 42 }) })).status, 400)
  const metrics = async () => (await fetch(`http://127.0.0.1:${admin}/metrics`)).text()
  // The rules file refused: its gauge, which an alert reads, moves on the live gateway.
  t.match(await metrics(), /^payments_gate_backend_errors_file_refused 0$/m)
  await writeFile(join(dir, 'rules.json.tmp'), '{"rules": 1}')
  await rename(join(dir, 'rules.json.tmp'), join(dir, 'rules.json'))
  t.ok(
    await until(async () => /^payments_gate_backend_errors_file_refused 1$/m.test(await metrics()), 10_000),
    'the refused rules file is counted',
  )
  const text = await metrics()
  t.match(text, /^payments_gate_backend_errors_reloads_total\{outcome="failed"} 1$/m)

  // Every family registered, events or not, has its TYPE line; a histogram's series add their suffixes.
  const exported = new Set<string>()
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\w+)$/gm)) {
    exported.add(name as string)
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) exported.add(`${name}${suffix}`)
    if (type === 'summary') for (const suffix of ['_sum', '_count']) exported.add(`${name}${suffix}`)
  }
  t.ok(exported.has('payments_gate_request_duration_seconds_bucket'))
  t.ok(
    exported.has('payments_gate_retry_protection_window_seconds'),
    'the memory store, the default, exports its window',
  )
  for (const [where, expr] of expressions) {
    const names = metricNames(expr)
    t.ok(names.length > 0, `${where} reads a metric`)
    for (const name of names)
      t.ok(exported.has(name) || recorded.has(name), `${where}: ${name} is exported (or recorded by the rules)`)
  }
  run.child.kill('SIGTERM')
  t.equal(await run.exited, 0)
})

t.test("the PrometheusRule's groups pass promtool check rules, and its unit tests, one per alert", async (t) => {
  t.match(ruleObject, {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: { name: 'payments-gate' },
  })
  const dir = t.testdir({})
  writeFileSync(join(dir, 'rules.yaml'), stringify({ groups }))
  copyFileSync(
    new URL('../deploy/prometheus-rules.test.yaml', import.meta.url),
    join(dir, 'prometheus-rules.test.yaml'),
  )
  const check = promtool(t, ['check', 'rules', '--lint=all', '--lint-fatal', join(dir, 'rules.yaml')])
  if (check === undefined) return
  t.equal(check.status, 0, check.output)
  t.match(check.output, `SUCCESS: ${rules.length} rules found`)

  t.same(unitTests.rule_files, ['rules.yaml'])
  const tested = (
    unitTests.tests as { name: string; alert_rule_test: { alertname: string; exp_alerts?: unknown[] }[] }[]
  ).map((test) => {
    const names = new Set(test.alert_rule_test.map((case_) => case_.alertname))
    t.equal(names.size, 1, `${test.name}: one alert`)
    t.ok(
      test.alert_rule_test.some((case_) => (case_.exp_alerts ?? []).length > 0),
      `${test.name}: a time it fires`,
    )
    t.ok(
      test.alert_rule_test.some((case_) => (case_.exp_alerts ?? []).length === 0),
      `${test.name}: a time it does not`,
    )
    return [...names][0]
  })
  t.same(tested.sort(), alerts.map((alert) => alert.alert).sort(), 'one unit test per alert')
  const unit = promtool(t, ['test', 'rules', join(dir, 'prometheus-rules.test.yaml')]) as NonNullable<
    ReturnType<typeof promtool>
  >
  t.equal(unit.status, 0, unit.output)
})

t.test(
  'the dashboard: Grafana 10 or later, a Prometheus data source variable, an entity variable, and every query parses',
  async (t) => {
    t.ok(dashboard.schemaVersion >= 38, 'schemaVersion 38 is Grafana 10.0')
    t.match(
      variables.find((variable) => variable.name === 'datasource'),
      { type: 'datasource', query: 'prometheus' },
    )
    t.match(
      variableSelector(variables.find((variable) => variable.name === 'entity') as Variable),
      /^payments_gate_would_refuse_total\b/,
    )
    t.equal(new Set(panels.map((panel) => panel.id)).size, panels.length, 'unique panel ids')
    for (const panel of panels) t.ok(panel.gridPos.x + panel.gridPos.w <= 24, `${panel.title}: within the 24 columns`)
    for (const panel of queried) {
      t.same(panel.datasource, DATASOURCE, `${panel.title}: the data source variable`)
      t.ok((panel.targets ?? []).length > 0, `${panel.title}: a query`)
      for (const target of panel.targets ?? []) {
        t.same(target.datasource, DATASOURCE, `${panel.title} ${target.refId}: the data source variable`)
        // The merchant-entity variable applies wherever the metric carries `entity`.
        const byEntity = /payments_gate_(would_re(fuse|write)|rate_limit|shed)_total/.test(target.expr)
        t.equal(
          target.expr.includes('entity=~"$entity"'),
          byEntity,
          `${panel.title} ${target.refId}: filtered by entity where it can be`,
        )
      }
    }
    const titles = queried.map((panel) => panel.title).join('\n')
    for (const wanted of [
      /Requests per second/,
      /Refusals by error_name/,
      /Would refuse/,
      /Would rewrite/,
      /Retry protection's outcomes/,
      /window/,
      /evictions/,
      /Backend faults by kind/,
      /p50 and p99/,
      /Reloads/,
      /Refused files/,
      /Rate limited and shed/,
      /Redis Cluster slots without a primary/,
      /Redis Cluster redirections/,
    ]) {
      t.match(titles, wanted)
    }
    // promtool parses expressions when it checks rules: each query as a rule of a scratch file.
    const queries = expressions.filter(([where]) => !where.startsWith('rule '))
    const scratch = {
      groups: [{ name: 'dashboard', rules: queries.map(([, expr], i) => ({ record: `dashboard:query_${i}`, expr })) }],
    }
    const file = join(t.testdir({}), 'dashboard-queries.yaml')
    writeFileSync(file, stringify(scratch))
    const check = promtool(t, ['check', 'rules', file])
    if (check === undefined) return
    t.equal(check.status, 0, check.output)
    t.match(check.output, `SUCCESS: ${queries.length} rules found`)
  },
)
