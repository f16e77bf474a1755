import t from 'tap'
import * as api from '../lib/index.js'

t.test('the public API', async (t) => {
  for (const name of [
    'createGate',
    'sendError',
    'sendRejection',
    'buildChecks',
    'serializeError',
    'reject',
    'hashPassword',
    'loadCredentials',
    'watchCredentials',
    'watchPolicies',
    'staticPolicies',
    'compileBackendErrors',
    'loadBackendErrors',
    'watchBackendErrors',
    'compilePolicy',
    'buildOpenApi',
    'createGateway',
    'createLogger',
    'createLogDestination',
    'createMetrics',
  ]) {
    t.type((api as Record<string, unknown>)[name], 'function', name)
  }
  t.equal(api.ERRORS.accessDenied.status, 401)
  t.equal(api.FIELD_ERRORS.fieldIsMissing, 'A mandatory field is missing.')
  t.equal(api.ERROR_CONTENT_TYPE, 'application/json')
  t.equal(api.serializeError({ errorName: 'bodyIsEmpty', message: 'm' }), '{"errorName":"bodyIsEmpty","message":"m"}')
})
