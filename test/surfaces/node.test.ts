import t from 'tap'
import type { GateLogger } from '../../lib/surfaces/shared.js'
import { SCRYPT_DEFAULTS } from '../../lib/defaults.js'
import { serializeError, reject } from '../../lib/errors.js'
import { CASES } from '../helpers/cases.js'
import { SALE_PATH, writeCredentials } from '../helpers/fixtures.js'
import { abortMidBody, send } from '../helpers/http.js'
import { memoryLogger } from '../helpers/logs.js'
import { serveOnLoopback as serve } from '../helpers/servers.js'
import { testGate } from '../helpers/surfaces.js'

t.test('a client that leaves mid-body gets nothing and the application is not called', async (t) => {
  // The real scrypt cost, so that the client can leave while the first password check still runs.
  const gate = await testGate(t, { credentials: await writeCredentials(t.testdir(), SCRYPT_DEFAULTS) })
  let calls = 0
  const { server, port, agent } = await serve(
    t,
    gate.handler((_req, res) => {
      calls++
      res.end()
    }),
  )
  // Once during the slow first password check, once while the body is being read (the check is cached by then).
  for (const warm of [false, true]) {
    if (warm) {
      t.equal((await send(port, CASES[0]!, agent)).status, 200)
      calls = 0
    }
    await abortMidBody(server, port, SALE_PATH, CASES[0]!.headers)
    t.equal(calls, 0)
    t.equal(
      (await send(port, { method: 'GET', path: '/x', headers: {} }, agent)).status,
      200,
      'the server still serves',
    )
    t.equal(calls, 1)
    calls = 0
  }
})

t.test('an authenticator that throws is a logged 500, not a crash', async (t) => {
  const logger = memoryLogger()
  const gate = await testGate(t, {
    credentials: {
      authenticate: () => {
        throw new Error('credential store down')
      },
    },
    logger: logger as unknown as GateLogger,
  })
  const { port, agent } = await serve(
    t,
    gate.handler(() => t.fail('not called')),
  )
  const answer = await send(port, CASES[0]!, agent)
  t.equal(answer.status, 500)
  t.equal(answer.body.toString(), serializeError(reject('internalErrorOccurred').body))
  t.equal(logger.lines.length, 1)
  t.match(logger.lines[0], {
    object: { err: { message: 'credential store down' } },
    message: 'payments-gate: internal error',
  })
})

t.test('gate.errors answers the backend own failures in the standard format', async (t) => {
  const gate = await testGate(t)
  const { port, agent } = await serve(
    t,
    gate.handler((_req, res) => gate.errors(res, 'serviceUnavailable', { message: 'Ledger is down.' })),
  )
  const answer = await send(port, { method: 'GET', path: '/anything', headers: {} }, agent)
  t.equal(answer.status, 503)
  t.equal(answer.headers['content-type'], 'application/json')
  t.equal(answer.body.toString(), '{"errorName":"serviceUnavailable","message":"Ledger is down."}')
})
