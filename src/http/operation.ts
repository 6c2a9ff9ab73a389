import type { FastifyInstance } from "fastify";
import type { AppContext } from "../context.ts";

/** One API operation: registers its route, with its schema and handler, on `app`. */
export type Operation = (app: FastifyInstance, ctx: AppContext) => void;
