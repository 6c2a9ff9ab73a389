import type { FastifyInstance } from "fastify";
import { type Static, Type } from "typebox";
import type { AppContext } from "../../context.ts";
import { noStore, ok } from "../../http/envelope.ts";
import type { Operation } from "../../http/operation.ts";
import { bearerAuth, NoStoreHeader, responses } from "../../http/schemas.ts";
import { limits } from "../../limits.ts";
import { getPublicKeys, registerPublicKey } from "./service.ts";

const ClientRef = Type.Object({
  id: Type.String({ format: "uuid" }),
  name: Type.String(),
  alias: Type.String(),
});
const ApiKeyRef = Type.Object({
  id: Type.String({ format: "uuid" }),
  alias: Type.String(),
  public_key: Type.String(),
});

const RegisterBody = Type.Object(
  {
    public_key: Type.String({
      minLength: 1,
      maxLength: limits.publicKeyPemLengthMax,
      description: "RSA public key, SPKI PEM (-----BEGIN PUBLIC KEY-----), 2048 bits or more",
    }),
  },
  { additionalProperties: false },
);
const registerPublicKeyRoute: Operation = (app, ctx) => {
  app.post<{ Body: Static<typeof RegisterBody> }>(
    "/v1/clients/api_key/public_key",
    {
      schema: {
        tags: ["keys"],
        operationId: "registerPublicKey",
        summary: "Register the calling API key's RSA public key",
        description: "Emisor ciphers sensitive response data under this key with RSA-OAEP-SHA256.",
        security: bearerAuth,
        body: RegisterBody,
        response: responses(Type.Object({ client: ClientRef, api_key: ApiKeyRef })),
      },
    },
    async (request) => ok(await registerPublicKey(ctx.db, request.caller, request.body.public_key)),
  );
};

const getPublicKeysRoute: Operation = (app, ctx) => {
  app.get(
    "/v1/clients/api_key/public_key",
    {
      schema: {
        tags: ["keys"],
        operationId: "getPublicKeys",
        summary: "Get your public key and the system's (contract 4.1)",
        description:
          "Cipher: RSA-OAEP with SHA-256 (OAEP digest and MGF1), Base64; standard and URL-safe Base64 are accepted on input. sensitive_data is 'All your base are belong to us...' ciphered under your key.",
        security: bearerAuth,
        response: responses(
          Type.Object({
            client: ClientRef,
            api_key: ApiKeyRef,
            system: Type.Object({ public_key: Type.String() }),
            sensitive_data: Type.String(),
          }),
          { headers: NoStoreHeader },
        ),
      },
    },
    async (request, reply) => {
      // sensitive_data is a ciphered secret, answered like every other one.
      noStore(reply);
      return ok(await getPublicKeys(ctx.db, ctx.systemKey, request.caller));
    },
  );
};

export function registerKeyRoutes(app: FastifyInstance, ctx: AppContext): void {
  for (const operation of [registerPublicKeyRoute, getPublicKeysRoute]) operation(app, ctx);
}
