/**
 * The public API of payments-gate as a library. Everything here is the same
 * code the proxy runs: one set of checks, one error table, one serializer.
 */
// First: on a Node not served it throws one line before any other module loads (node-version.ts).
import './supported-node.js'
export { createGate, type Gate, type GateOptions } from './gate.js'
export { createGateway, type Gateway, type GatewayOptions } from './proxy/server.js'
export { DEFAULTS, mediaTypes, type MediaTypes } from './defaults.js'
export type { GateContext, GateLogger, GateReport } from './surfaces/shared.js'
export type { NodeNext } from './surfaces/node.js'
export type {
  ExpressErrorMiddleware,
  ExpressMiddleware,
  ExpressNext,
  ExpressRequest,
  FastifyGateOptions,
  FastifyGatePlugin,
  HonoGateMiddleware,
  PaymentsGateInput,
} from './surfaces/types.js'
export {
  buildChecks,
  type Checks,
  type ChecksOptions,
  type Passed,
  type Reported,
  type Verdict,
} from './checks/index.js'
export type { Rewrite } from './checks/policy.js'
export type { RequestTarget } from './checks/route.js'
export { answerOf, sendError, sendRejection, writeAnswer, type Answer } from './http/answer.js'
export {
  ERRORS,
  FIELD_ERRORS,
  ERROR_CONTENT_TYPE,
  errorBodySchema,
  reject,
  serializeError,
  type ErrorBody,
  type ErrorName,
  type FieldError,
  type FieldErrorName,
  type Rejection,
  type RejectOptions,
} from './errors.js'
export type { Authenticator, Principal } from './checks/auth.js'
export { hashPassword } from './credentials/hash.js'
export { CredentialStore, type CredentialStoreOptions, type UserCredentials } from './credentials/store.js'
export { loadCredentials } from './credentials/load.js'
export { watchCredentials, type WatchCredentialsOptions, type WatchedCredentials } from './credentials/watch.js'
export {
  compilePolicy,
  staticPolicies,
  type Mode,
  type Policy,
  type PolicyFile,
  type PolicySource,
} from './policy/policy.js'
export { watchPolicies, type PolicyStore, type WatchPoliciesOptions } from './policy/store.js'
export type { FileProblem, ReloadOutcome } from './watch.js'
export {
  compileBackendErrors,
  loadBackendErrors,
  NO_RULES,
  type BackendErrorRule,
  type BackendErrorRules,
  type BackendErrorSource,
} from './backend-errors/rules.js'
export { watchBackendErrors, type BackendErrorStore, type WatchBackendErrorsOptions } from './backend-errors/store.js'
export type { Operation, PaymentRequest, RecurringRequest, SaleRequest } from './schema/payment.js'
export { buildOpenApi, type OpenApiOptions } from './openapi.js'
export { createLogDestination, createLogger, type Logger } from './log.js'
export { createMetrics, type Metrics } from './metrics.js'
