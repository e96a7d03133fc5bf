-- Listings of one object (`/history?name=…`, `/missed?name=…`, `/transitions?name=…`, with or
-- without a namespace) read a range of a (name, namespace, id) index, newest first, instead of
-- scanning every row: the listing queries now leave out the conditions of filters not given.
-- These replace the (namespace, name, …) indexes, which a name alone could not use.
DROP INDEX restarts_by_object;
DROP INDEX slots_by_name;
DROP INDEX transitions_by_object;
CREATE INDEX restarts_by_name ON restarts (name, namespace, id);
CREATE INDEX slots_by_name ON slots (name, namespace, id);
CREATE INDEX transitions_by_name ON transitions (name, namespace, id);
