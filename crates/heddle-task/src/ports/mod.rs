//! Ports and arbiters (CCR): typed message queues and the rules that run handlers when
//! messages arrive, on a pool of dispatcher threads.
