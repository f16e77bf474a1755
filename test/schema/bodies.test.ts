import t from 'tap'
import { buildChecks } from '../../lib/checks/index.js'
import { FIELD_RULE_CASES, VALID_EDGE_CASES } from '../helpers/cases.js'
import { bytes, policies } from '../helpers/fixtures.js'

const features = { dynamicMcc: true, paymentFacilitator: false, moto: true, debtRepayment: true }
const paymentInstruments = ['card/plain', 'card/token', 'card/network-token']
const checks = buildChecks({
  policies: policies(
    { entity: 'default', paymentInstruments, features },
    { entity: 'facilitator', features: { ...features, paymentFacilitator: true } },
  ),
})

t.test('each field rule answers its field errors, each problem once', async (t) => {
  for (const rule of FIELD_RULE_CASES) {
    const verdict = checks.checkBody(rule.operation, bytes(rule.body))
    t.equal(verdict.ok, false, rule.name)
    if (verdict.ok) continue
    t.equal(verdict.status, 400, rule.name)
    t.equal(verdict.body.errorName, 'bodyDoesNotMatchSchema', rule.name)
    t.strictSame(
      verdict.body.validationErrors?.map((item) => [item.errorName, item.jsonPath]),
      rule.expected,
      rule.name,
    )
    for (const item of verdict.body.validationErrors ?? [])
      t.ok(item.message.length > 0, `${rule.name}: a message for people`)
  }
})

t.test('bodies at the edges of the rules pass', async (t) => {
  for (const edge of VALID_EDGE_CASES) {
    const verdict = checks.checkBody(edge.operation, bytes(edge.body))
    t.equal(verdict.ok, true, edge.name)
  }
})

t.test('messages never repeat the value that was sent', async (t) => {
  for (const rule of FIELD_RULE_CASES) {
    const verdict = checks.checkBody(rule.operation, bytes(rule.body))
    t.notMatch(JSON.stringify(verdict), /4444333322221112|4444333322221111/, rule.name)
  }
})
