# Shared with reactor.pyx: which values the stock C pickler may take (see classify.pyx).
cdef enum:
    NOT_PLAIN = 0
    PLAIN = 1
    PLAIN_NUMPY = 2     # plain, with numpy arrays or scalars inside (plain_pickle's compact forms)

cpdef int classify(value, plain_types, int max_depth, int depth=*) except -1
