/**
 * The public API of payments-gate as a library. Everything here is the same
 * code the proxy runs: one set of checks, one error table, one serializer.
 */
export { createGate, type Gate, type GateOptions } from './create-gate.js'
export type { GateContext, GateLogger } from './adapters/context.js'
export type { NodeNext } from './adapters/node.js'
export type { FastifyGateOptions } from './adapters/fastify.js'
export { buildChecks, DEFAULT_BODY_LIMIT, DEFAULT_VENDOR, type Accepted, type Checks, type ChecksOptions, type Verdict } from './gate.js'
export type { Passed } from './screen.js'
export { sendError, sendRejection } from './respond.js'
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
export { CredentialStore, hashPassword, loadCredentials, type CredentialStoreOptions, type UserCredentials } from './credentials.js'
export { compilePolicy, staticPolicies, type Policy, type PolicyFile, type PolicySource } from './policy/policy.js'
export { watchPolicies, type PolicyStore, type WatchPoliciesOptions } from './policy/store.js'
export type { Operation, PaymentRequest, RecurringRequest, SaleRequest } from './schema/payment.js'
export { buildOpenApi, type OpenApiOptions } from './openapi.js'
