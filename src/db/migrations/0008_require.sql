-- A check inside a statement that is its own transaction (autocommit): when `ok` is not true the
-- statement fails with SQLSTATE EM001 and `failure` as its message, so everything the statement
-- wrote rolls back. The payment fast path (src/modules/payments/repository.ts) uses it to refuse
-- its one-statement form whenever the decision it was sent with no longer holds under the locks.
-- Volatile (the default), so PostgreSQL never evaluates it at plan time.
create function emisor_require(ok boolean, failure text) returns boolean
language plpgsql as $$
begin
  if ok is not true then
    raise exception using errcode = 'EM001', message = failure;
  end if;
  return true;
end
$$;
