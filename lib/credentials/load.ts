import { CodedError } from '../coded-error.js'
import { FILE_LIMITS } from '../defaults.js'
import { readFailure } from '../file-error.js'
import { readLimitedText } from '../read-file.js'
import { compileSchema } from '../schema/compile.js'
import { Type, type Static } from '../schema/typebox.js'
import { CredentialStore, type CredentialStoreOptions, type UserCredentials } from './store.js'
import { repeatedKey, REPEATED } from '../json-text.js'

const CredentialsFile = Type.Object(
  {
    users: Type.Array(
      Type.Object(
        {
          username: Type.String({
            minLength: 1,
            pattern: '^[^:\\u0000-\\u001f\\u007f]+$',
            'x-format': 'no colon and no control characters (RFC 7617)',
          }),
          password: Type.String({ minLength: 1 }),
          entities: Type.Array(Type.String({ minLength: 1 })),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
)
type CredentialsFile = Static<typeof CredentialsFile>

const credentialsFileSchema = compileSchema<CredentialsFile>(CredentialsFile)

/**
 * Why a text is not JSON, without any of the text: V8's message for an
 * unexpected token quotes the text around it, and a credentials file holds
 * password hashes (the reason is logged on a reload). Its other messages name
 * a position or the end of the input, never the text, and are kept.
 */
function unquoted(message: string): string {
  return message.includes('"') ? 'an unexpected character (the text is not shown: it holds password hashes)' : message
}

/** The users of a credentials file's text; anything wrong throws an `ECREDENTIALS` error with the reason. */
export function parseCredentials(text: string): readonly UserCredentials[] {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (error) {
    throw new CodedError('ECREDENTIALS', `not JSON: ${unquoted((error as Error).message)}`)
  }
  const repeated = repeatedKey(text)
  if (repeated !== undefined) throw new CodedError('ECREDENTIALS', `${repeated}: ${REPEATED}`)
  if (!credentialsFileSchema.check(parsed)) {
    const reasons = credentialsFileSchema.errors(parsed).map((item) => `${item.jsonPath}: ${item.message}`)
    throw new CodedError('ECREDENTIALS', reasons.join('; '))
  }
  // A file emptied for a moment (a deploy that writes it in two steps) must not lock every client out; revoking
  // everybody is a user with no entities, or a stopped gateway (docs/credentials.md).
  if (parsed.users.length === 0)
    throw new CodedError('ECREDENTIALS', 'no users (to refuse everybody, see docs/credentials.md)')
  return parsed.users
}

/** The store of a credentials file and the text it was built from; anything wrong throws an `ECREDENTIALS` error naming the file. */
export async function openCredentials(
  file: string,
  options: CredentialStoreOptions,
): Promise<{ store: CredentialStore; text: string }> {
  let text: string
  try {
    text = await readLimitedText(file, FILE_LIMITS.credentials)
  } catch (error) {
    throw new CodedError('ECREDENTIALS', `${file}: ${readFailure(error)}`)
  }
  try {
    return { store: new CredentialStore(parseCredentials(text), options), text }
  } catch (error) {
    throw new CodedError('ECREDENTIALS', `${file}: ${(error as Error).message}`)
  }
}

/**
 * Reads and validates a credentials file (`{"users": [{"username", "password", "entities"}]}`).
 * Anything wrong with it throws an `ECREDENTIALS` error naming the file and the reason.
 */
export async function loadCredentials(file: string, options: CredentialStoreOptions = {}): Promise<CredentialStore> {
  return (await openCredentials(file, options)).store
}
