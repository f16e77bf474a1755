import { PassThrough } from 'node:stream'
import t from 'tap'
import { curlLine, DEMO_PAN, startDemo, type Example } from '../../lib/cli/demo.js'
import { luhnValid } from '../../lib/luhn.js'
import { COVERED, spawnCli } from '../helpers/cli.js'
import { failAccept, send } from '../helpers/http.js'
import { takenPort } from '../helpers/servers.js'

function io() {
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  const out: string[] = []
  const err: string[] = []
  stdout.on('data', (chunk: Buffer) => out.push(chunk.toString()))
  stderr.on('data', (chunk: Buffer) => err.push(chunk.toString()))
  return { io: { stdin: new PassThrough(), stdout, stderr, env: {} }, out: () => out.join(''), err: () => err.join('') }
}

/** Sends an example the way its printed curl line does. */
function sendExample(example: Example) {
  const url = new URL(example.url)
  return send(url.origin, { path: url.pathname, headers: example.headers, body: example.body })
}

t.test(
  'the demo answers its own curl examples: a sale and a recurring authorization accepted, a sale refused',
  async (t) => {
    // Started from a folder with no policies: the demo takes the samples beside package.json.
    const cwd = process.cwd()
    process.chdir(t.testdir())
    t.teardown(() => process.chdir(cwd))
    const streams = io()
    const demo = await startDemo(['--listen', '0'], streams.io)
    t.teardown(() => demo.stop())
    const printed = streams.err()
    t.match(printed, /user "demo", password "[A-Za-z0-9_-]+", entities collections, default, eu-tokens, marketplace\n/)
    t.ok(printed.includes(curlLine(demo.accepted)), 'the accepted example is printed as a curl line')
    t.ok(printed.includes(curlLine(demo.recurring)), 'the recurring one')
    t.ok(printed.includes(curlLine(demo.refused)), 'and the refused one')
    t.match(demo.accepted.url, /^http:\/\/127\.0\.0\.1:\d+\/payments\/sales\/migrateCardOnFile$/)

    const accepted = await sendExample(demo.accepted)
    t.equal(accepted.status, 201)
    t.equal(accepted.json.outcome, 'authorized')
    t.equal(accepted.json.receivedByBackend.merchant.mcc, '5734', 'the echo shows the rewrites')
    t.equal(accepted.json.receivedByBackend.instruction.paymentInstrument.cardNumber, '444433******1111')

    t.match(demo.recurring.url, /\/payments\/authorizations\/migrateRecurring$/)
    const recurring = await sendExample(demo.recurring)
    t.equal(recurring.status, 201, recurring.text)
    t.equal(recurring.json.receivedByBackend.instruction.intent, 'subscription')

    const refused = await sendExample(demo.refused)
    t.equal(refused.status, 400)
    t.match(refused.json.validationErrors, [{ errorName: 'panFailedLuhnCheck' }])

    const other = await send(new URL(demo.accepted.url).origin, { method: 'GET', path: '/elsewhere' })
    t.equal(other.status, 404, 'the demo backend knows only the two operations')
    const garbled = await send(demo.backend.url, { path: new URL(demo.accepted.url).pathname, body: '{"cut' })
    t.same([garbled.status, garbled.json.errorName], [400, 'bodyIsNotJson'], 'what is not JSON is answered, not thrown')

    // An accept that fails (lib/http/listen.ts) is told, and both listeners go on.
    failAccept(demo.backend.server, 'ENOBUFS')
    failAccept(demo.serving.gateway.server, 'EPERM')
    t.equal((await sendExample(demo.accepted)).status, 201, 'the demo still answers')
    t.match(streams.err(), /the demo backend could not accept a connection: accept ENOBUFS\n/)
    t.match(
      streams.out(),
      /"err":\{"type":"Error","code":"EPERM","message":"accept EPERM"[^\n]*"msg":"connection not accepted"/,
    )

    const whole = streams
      .out()
      .split('\n')
      .filter((line) => (line.match(/[0-9]{12,19}/g) ?? []).some(luhnValid))
    t.same(whole, [], 'no log line holds a whole card number')
    t.ok(luhnValid(DEMO_PAN))
  },
)

t.test('an IPv6 listen address is printed in brackets', async (t) => {
  const demo = await startDemo(['--listen', '[::1]:0'], io().io)
  t.teardown(() => demo.stop())
  t.match(demo.accepted.url, /^http:\/\/\[::1\]:\d+\//)
  t.equal((await sendExample(demo.accepted)).status, 201)
})

t.test('curl lines quote single quotes for the shell', async (t) => {
  t.equal(
    curlLine({ url: 'http://h/p', headers: { A: "it's" }, body: '{}' }),
    `curl -i -H 'A: it'\\''s' --data '{}' 'http://h/p'`,
  )
})

t.test('a port in use stops the demo with a one-line reason', async (t) => {
  const port = await takenPort(t)
  await t.rejects(startDemo(['--listen', `127.0.0.1:${port}`], io().io), {
    message: `--listen: 127.0.0.1:${port} is in use; stop what listens there or give another port`,
  })
})

t.test('the real process: demo starts, and SIGTERM stops it with exit 0', async (t) => {
  const run = spawnCli(['demo', '--listen', '127.0.0.1:0'], COVERED)
  await run.waitFor(/Ctrl-C stops the demo/)
  run.child.kill('SIGTERM')
  t.equal(await run.exited, 0)
  t.match(run.output().stdout, /"msg":"stopped"/)
})
